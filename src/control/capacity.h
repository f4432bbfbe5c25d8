// Admission control: how many sandboxes may run at once, on the host and per
// API key. A create that does not fit waits in one FIFO line until room
// frees or its deadline passes; it never fails just because the host is
// momentarily full.
//
// Order: waiters are served strictly first come, first served among those
// whose key is under its limit -- a big shape at the head holds back smaller
// ones behind it, so it cannot starve. A waiter held only by its own key's
// limit does not block other keys.
//
// Warm-pool copies hold room of the host's budget (TakeForPool) while they
// wait, never a key's: the pool takes only room nobody waits for, and gives
// it back to a waiting create (control/warm_pool.h reclaims its copies
// while anyone waits). A copy handed out passes its room to the key that
// took it (HandOut): a create served from a pool neither waits nor counts
// twice.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "common/shape.h"

namespace kiln::control {

struct CapacityLimits {
  int64_t host_memory_mib = 0;  // physical memory for sandboxes
  int host_vcpus = 0;
  double memory_overcommit = 1.0;  // reservations may total this many times the host's
  double cpu_overcommit = 1.0;
  int key_sandboxes = 100;  // default concurrent sandboxes per key
  // Creates of one key that may wait in line at once (0: no cap); past it
  // Acquire answers kLineFull at once, so one key cannot fill the line.
  int key_waiting = 256;
  // The state disk: sandboxes' disks (diskMiB, each capped by its overlay's
  // size) may total this times disk_overcommit. 0: not counted.
  int64_t host_disk_mib = 0;
  double disk_overcommit = 64.0;

  int64_t memory_budget_mib() const {
    return static_cast<int64_t>(static_cast<double>(host_memory_mib) * memory_overcommit);
  }
  double vcpu_budget() const { return host_vcpus * cpu_overcommit; }
  // INT64_MAX when disk is not counted.
  int64_t disk_budget_mib() const {
    return host_disk_mib > 0
               ? static_cast<int64_t>(static_cast<double>(host_disk_mib) * disk_overcommit)
               : INT64_MAX;
  }
};

class Capacity {
 public:
  explicit Capacity(CapacityLimits limits);
  ~Capacity();
  Capacity(const Capacity&) = delete;
  Capacity& operator=(const Capacity&) = delete;

  enum class Result { kGranted, kNoCapacity, kQuotaExceeded, kNeverFits, kLineFull };
  // Reserves room for one sandbox of `shape` for `key`, waiting until
  // `deadline` in line. kNeverFits: the shape exceeds the whole host budget.
  // On a timeout, kQuotaExceeded if the key's own limit was what held it.
  // kLineFull (at once): the key already has key_waiting creates waiting.
  // `cancelled` gives up the place in line, e.g. when the client hung up:
  // room is never granted to nobody. It must be cheap and must not block:
  // one watcher thread polls every waiter's, twice a second, under the lock.
  Result Acquire(const std::string& key, const Shape& shape,
                 std::chrono::steady_clock::time_point deadline,
                 const std::function<bool()>& cancelled = nullptr);
  // Returns a reservation made by Acquire (or Adopt).
  void Release(const std::string& key, const Shape& shape);
  // Shutdown: every waiter gives up now, and later Acquires fail at once.
  void Close();
  // Counts a sandbox that already runs (restart recovery, pool hand-out):
  // never waits, may go over the budget.
  void Adopt(const std::string& key, const Shape& shape);
  // Room for one warm-pool copy, if the host has it and no create waits;
  // never waits. ReleasePool gives it back.
  bool TakeForPool(const Shape& shape);
  void ReleasePool(const Shape& shape);
  // A pool copy's room becomes `key`'s reservation (Release returns it).
  void HandOut(const std::string& key, const Shape& shape);
  // False if `key` runs its limit of sandboxes.
  bool KeyHasRoom(const std::string& key) const;

  struct Stats {
    int64_t reserved_memory_mib = 0;  // sandboxes' and pool copies'
    double reserved_vcpus = 0;
    int64_t reserved_disk_mib = 0;
    int running = 0;
    int waiting = 0;
    int pooled = 0;  // warm-pool copies holding room
  };
  Stats stats() const;
  const CapacityLimits& limits() const { return limits_; }
  // False if `shape` exceeds the whole host budget (Acquire's kNeverFits).
  bool EverFits(const Shape& shape) const {
    return shape.memory_mib <= limits_.memory_budget_mib() &&
           shape.vcpu <= limits_.vcpu_budget() + 1e-9 &&
           shape.disk_mib <= limits_.disk_budget_mib();
  }
  // Seconds a client should wait before retrying a create.
  int RetryAfterSeconds() const;

 private:
  // A waiter sleeps on its own condition variable until granted, given up
  // or out of time. With one shared variable, 10,000 waiters polling for
  // hang-ups turned every unlock into a scan of a 10,000-long futex queue.
  struct Waiter {
    std::string key;
    Shape shape;
    const std::function<bool()>* cancelled = nullptr;
    bool granted = false;
    bool gone = false;  // its cancelled() said so
    std::condition_variable cv;
  };
  bool FitsHost(const Shape& s) const;
  bool KeyFull(const std::string& key) const;
  void Take(const std::string& key, const Shape& s);
  // Grants waiters in line order; called with mu_ held after any change.
  void Grant();
  // Wakes `w`, granted or gone, and moves it out of line_ into done_.
  void Leave(std::list<Waiter>::iterator w);
  // Polls the waiters' cancelled() while anyone waits, until destruction.
  void WatchHangUps(std::stop_token stop);

  const CapacityLimits limits_;
  mutable std::mutex mu_;
  // Only those still waiting are in line_, so a pass over it never walks
  // past waiters that were served or hung up: 10,000 clients that hung up
  // at once made each departure's Grant() walk all of them. A waiter that
  // leaves is spliced (its iterator stays valid) into done_ until its
  // Acquire() returns.
  std::list<Waiter> line_;
  std::list<Waiter> done_;
  bool closed_ = false;                     // no more grants
  std::condition_variable_any watcher_cv_;  // wakes the watcher: a waiter, or stop
  std::jthread watcher_;
  int64_t memory_mib_ = 0;
  double vcpus_ = 0;
  int64_t disk_mib_ = 0;
  int running_ = 0;
  int pooled_ = 0;
  std::map<std::string, int> per_key_;
  std::map<std::string, int> waiting_per_key_;  // Acquires of each key under way
};

}  // namespace kiln::control
