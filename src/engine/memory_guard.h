// Holds a sandbox to its memoryMiB without killing the whole sandbox.
//
// The host cgroup's hard limit is memoryMiB plus headroom for gVisor; hitting
// it makes the host OOM killer take the Sentry, i.e. the whole sandbox.
// Before that, when the cgroup's usage crosses memoryMiB, the kernel signals
// an eventfd (cgroup v1 memory threshold) and the guard asks the sandbox's
// agent to kill its largest process: a memory bomb dies inside its sandbox.
// Event-driven, so an idle sandbox costs nothing.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "common/unique_fd.h"

namespace kiln::engine {

class MemoryGuard {
 public:
  MemoryGuard();
  ~MemoryGuard();

  // Calls on_exceeded (on the guard's thread) each time usage of the memory
  // cgroup at `cgroup_dir` rises past `threshold_bytes`. False if the host
  // has no cgroup v1 memory controller there.
  //
  // The kernel signals crossings in both directions, and the Sentry frees a
  // killed process's pages a little later, so the fall below the threshold
  // is signalled after the kill: acting on it would kill an innocent next
  // process. Usage is read again and only a crossing upward acts.
  bool Watch(const std::string& id, const std::string& cgroup_dir, int64_t threshold_bytes,
             std::function<void()> on_exceeded);
  void Unwatch(const std::string& id);

 private:
  struct Entry {
    UniqueFd event;
    UniqueFd usage;
    int64_t threshold = 0;
    std::function<void()> cb;
  };
  void Loop();
  static int64_t ReadUsage(int usage_fd);

  int epfd_;
  UniqueFd wake_;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
  std::map<int, std::string> by_fd_;
  bool stop_ = false;
};

}  // namespace kiln::engine
