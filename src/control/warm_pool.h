// Warm pools: for a snapshot, a number of restored copies that have never
// been handed out, kept ready so that a create from that snapshot takes
// one in milliseconds instead of a restore's hundreds. A filler thread
// restores new copies in the background as copies are taken.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "control/capacity.h"
#include "engine/engine.h"
#include "store/snapshot_store.h"

namespace kiln::control {

struct PooledCopy {
  std::string id;  // the engine sandbox's id, kept when it is handed out
  std::shared_ptr<engine::AgentChannel> channel;
  bool frozen = false;  // thawed when handed out
  Shape shape;          // the room it holds in Capacity while it waits
};

struct WarmPoolOptions {
  // A copy whose agent does not answer a ping within this long at hand-out
  // is discarded.
  int ping_timeout_ms = 2000;
};

struct PoolStatus {
  int size = 0;   // target
  int ready = 0;  // restored and waiting
  uint64_t memory_bytes = 0;
};

class WarmPool {
 public:
  // `capacity`: where copies hold room while they wait (null: nowhere, in
  // unit tests of the pool alone).
  WarmPool(engine::Engine& engine, std::string rootfs, store::SnapshotStore& snapshots,
           WarmPoolOptions options = {}, Capacity* capacity = nullptr);
  ~WarmPool();  // destroys every pooled copy

  // Sets how many ready copies to keep for `snapshot_id` (0 = none).
  void Resize(const std::string& snapshot_id, int size);
  // A ready copy whose agent answers, or nullopt (then restore directly).
  // The room the copy held becomes `key`'s reservation in Capacity.
  std::optional<PooledCopy> Take(const std::string& snapshot_id, const std::string& key);
  PoolStatus StatusOf(const std::string& snapshot_id);
  // Every pool's status, by snapshot id.
  std::map<std::string, PoolStatus> StatusAll();
  // Destroys the pool of a deleted snapshot.
  void Drop(const std::string& snapshot_id);

 private:
  struct Pool {
    int size = 0;
    int filling = 0;
    std::deque<PooledCopy> ready;
    int64_t retry_ms = 0;  // no room when it last tried: not before this
  };
  void FillLoop(std::stop_token stop);
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
  // Two restores at a time: one per core of the 2-core build machine, so
  // that a pool drained by a burst of creates refills while they run.
  static constexpr int kFillers = 2;
  std::vector<std::jthread> fillers_;  // last: stopped and joined first
};

}  // namespace kiln::control
