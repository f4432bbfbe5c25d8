// Holds a sandbox to its memoryMiB without killing the whole sandbox.
//
// The host cgroup's hard limit is memoryMiB plus headroom for gVisor; hitting
// it makes the host OOM killer take the Sentry, i.e. the whole sandbox.
// Before that, when the cgroup's usage crosses memoryMiB, the kernel signals
// an eventfd (cgroup v1 memory threshold) and the guard asks the sandbox's
// agent to kill its largest process: a memory bomb dies inside its sandbox.
// Event-driven, so an idle sandbox costs nothing.
//
// The cgroup's usage also counts the page cache of the sandbox's disk (its
// overlay's backing file on the host), which the kernel reclaims by itself.
// So a crossing is judged by the sandbox's own memory (rss + shmem: the
// Sentry's heap and the application memory file), and while the page cache
// alone keeps usage above the threshold -- when no new crossing can be
// signalled -- the guard polls that sandbox every 100 ms instead.
//
// Arming a threshold (a write to cgroup.event_control) waits for an RCU
// grace period in the kernel: 6-15 ms here, which was a tenth of a restore.
// So Watch() only opens the files and a registrar thread arms them, off the
// start path; until then (milliseconds) the host limit alone holds.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "common/unique_fd.h"

namespace kiln::engine {

// The sandbox's own memory from a cgroup v1 memory.stat: total_rss +
// total_shmem (page cache of files excluded).
int64_t ParseAnonBytes(std::string_view memory_stat);

class MemoryGuard {
 public:
  MemoryGuard();
  ~MemoryGuard();

  // Calls on_exceeded (on the guard's thread) each time usage of the memory
  // cgroup at `cgroup_dir` rises past `threshold_bytes`, and once if it is
  // already past when the threshold is armed. False if the host has no
  // cgroup v1 memory controller there. Returns before the threshold is armed.
  //
  // The kernel signals crossings in both directions, and the Sentry frees a
  // killed process's pages a little later, so the fall below the threshold
  // is signalled after the kill: acting on it would kill an innocent next
  // process. Usage is read again and only a crossing upward acts.
  bool Watch(const std::string& id, const std::string& cgroup_dir, int64_t threshold_bytes,
             std::function<void()> on_exceeded);
  void Unwatch(const std::string& id);

 private:
  static constexpr int kPollMs = 100;
  // At most one kill a second per sandbox: the Sentry frees a killed
  // process's memory tens of milliseconds later, and a poll meanwhile must
  // not take that for a second bomb.
  static constexpr int64_t kCooldownMs = 1000;

  struct Entry {
    UniqueFd event;
    UniqueFd usage;
    UniqueFd stat;     // memory.stat
    UniqueFd control;  // cgroup.event_control, until armed
    int64_t threshold = 0;
    std::function<void()> cb;
    bool polling = false;  // usage is over the threshold: checked every kPollMs
    int64_t acted_ms = -kCooldownMs;
  };
  enum class Verdict { kFine, kOver, kCacheHigh };
  static Verdict Assess(const Entry& e);
  void Loop(std::stop_token stop);
  void ArmLoop(std::stop_token stop);
  static int64_t ReadUsage(int usage_fd);
  static int64_t ReadAnon(int stat_fd);

  int epfd_;
  UniqueFd wake_;
  std::jthread thread_;  // Loop
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
  std::map<int, std::string> by_fd_;
  std::deque<std::string> to_arm_;  // ids whose threshold is not armed yet
  int polling_ = 0;                 // entries with polling set
  int64_t last_poll_ms_ = 0;
  std::condition_variable_any arm_cv_;
  std::jthread armer_;  // last: stopped and joined first
};

}  // namespace kiln::engine
