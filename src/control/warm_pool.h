// Warm pools: for a snapshot, a number of restored copies that have never
// been handed out, kept ready so that a create from that snapshot takes
// one in milliseconds instead of a restore's hundreds. Filler threads
// restore new copies in the background, at a low CPU weight, as copies are
// taken. A pool's size is pinned (`Resize`) or follows its demand
// (PoolSizer, within one memory budget).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "control/capacity.h"
#include "control/pool_sizer.h"
#include "engine/engine.h"
#include "store/snapshot_store.h"

namespace kiln::control {

struct PooledCopy {
  std::string id;  // the engine sandbox's id, kept when it is handed out
  std::shared_ptr<engine::AgentChannel> channel;
  Shape shape;  // the room it holds in Capacity while it waits
  // The host's wall clock minus its monotonic clock when the copy was
  // restored, which is when gVisor read the host's time: if it differs at
  // hand-out, the host clock stepped while the copy waited.
  int64_t wall_offset_ms = 0;
};

struct WarmPoolOptions {
  // The host's wall clock minus its monotonic clock, in ms (a copy's
  // wall_offset_ms). Replaced in unit tests to step the clock.
  std::function<int64_t()> wall_offset_ms;
  // Pools sized by demand (PoolSizer); off: only pinned pools fill.
  bool adaptive = false;
  PoolSizerOptions sizer;
  // Where pinned sizes are kept across restarts ("" = not kept).
  std::string pins_path;
  // Every restored copy (pooled, direct, forked) forks and reaps a child
  // before it is used, which takes part of its first process's cost; the
  // next PID is then one past the source's (kilnd --warm-copies, off by
  // default: docs/notes/2026-12-03-first-command.md).
  bool warm_copies = false;
};

struct PoolStatus {
  int size = 0;   // target
  int ready = 0;  // restored and waiting
  uint64_t memory_bytes = 0;
  bool pinned = false;  // sized by `:pool {size}`, not by demand
  int wanted = 0;       // what demand asks for (pinned: the pin)
  // Why it holds fewer than wanted, or will: "" (it does not),
  // "memory_budget", "max_size", "no_capacity", "restore_failed".
  std::string unfilled_reason;
};

class WarmPool {
 public:
  // `capacity`: where copies hold room while they wait (null: nowhere, in
  // unit tests of the pool alone).
  WarmPool(engine::Engine& engine, std::string rootfs, store::SnapshotStore& snapshots,
           WarmPoolOptions options = {}, Capacity* capacity = nullptr);
  ~WarmPool();  // destroys every pooled copy

  // Pins how many ready copies to keep for `snapshot_id` (0 = none);
  // nullopt gives the pool back to its demand.
  void Resize(const std::string& snapshot_id, std::optional<int> size);
  // A create asked for `snapshot_id` (before Take): its pool's demand.
  void Arrived(const std::string& snapshot_id, bool image_warm);
  // A ready copy whose sandbox is alive and whose clock is the host's, or
  // nullopt (then restore directly). Checked from the host: the copy is
  // not woken, so the create's first command is its first wake.
  // The room the copy held becomes `key`'s reservation in Capacity.
  std::optional<PooledCopy> Take(const std::string& snapshot_id, const std::string& key);
  PoolStatus StatusOf(const std::string& snapshot_id);
  // Every pool's status, by snapshot id.
  std::map<std::string, PoolStatus> StatusAll();
  // Pins kept by an earlier run (options.pins_path), filled from now on:
  // called once the engine's leftovers are gone.
  void LoadPins();
  // Destroys the pool of a deleted snapshot.
  void Drop(const std::string& snapshot_id);

 private:
  struct Pool {
    int size = 0;
    std::optional<int> pinned;
    PoolPlan plan;  // the demand's answer, when not pinned
    int filling = 0;
    std::deque<PooledCopy> ready;
    int64_t retry_ms = 0;  // no room or a failure: not before this
    bool no_room = false;  // Capacity had none when it last tried
    int failures = 0;      // restores failed in a row (backs off)
  };
  void FillLoop(std::stop_token stop);
  // Applies the sizer's plan to the pools that are not pinned. Called with
  // mu_ held; returns the copies to destroy (outside the lock).
  std::deque<PooledCopy> AdaptLocked(int64_t now_ms);
  // Trims a pool to its size; erases it when it is empty and unwanted.
  std::deque<PooledCopy> TrimLocked(const std::string& id);
  void SavePinsLocked();
  void Destroy(std::deque<PooledCopy> copies);
  // Gives one waiting copy's room back when a create waits for room.
  // Called with mu_ held; unlocks it while the copy is destroyed.
  void Reclaim(std::unique_lock<std::mutex>& lock);

  engine::Engine& engine_;
  Capacity* capacity_;
  const std::string rootfs_;
  store::SnapshotStore& snapshots_;
  const WarmPoolOptions options_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::map<std::string, Pool> pools_;
  PoolSizer sizer_;
  // Two restores at a time: one per core of the 2-core build machine, so
  // that a pool drained by a burst of creates refills while they run.
  static constexpr int kFillers = 2;
  std::vector<std::jthread> fillers_;  // last: stopped and joined first
};

}  // namespace kiln::control
