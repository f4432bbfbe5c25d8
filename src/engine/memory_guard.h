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
  bool Watch(const std::string& id, const std::string& cgroup_dir, int64_t threshold_bytes,
             std::function<void()> on_exceeded);
  void Unwatch(const std::string& id);

 private:
  struct Entry {
    UniqueFd event;
    UniqueFd usage;
    std::function<void()> cb;
  };
  void Loop();

  int epfd_;
  UniqueFd wake_;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
  std::map<int, std::string> by_fd_;
  bool stop_ = false;
};

}  // namespace kiln::engine
