// The snapshot catalogue: the stored snapshots, who may see which, their
// warm pools, and when each one's storage was last metered.
//
// It owns the one rule of snapshot visibility (Visible): every front asks
// it, so a key never sees another key's snapshot, an image's warm copy or a
// paused sandbox's checkpoint by one route and not by another. It sits
// apart from the sandbox lifecycle (SandboxManager, which owns it) because
// snapshots outlive the sandboxes they were taken of and are reached
// without one: listed, imported, pooled, expired.
//
// Thread-safe: the store and the pool lock inside, the metering marks
// under a lock of their own (taken last: nothing else is locked under it).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "control/capacity.h"
#include "control/metering.h"
#include "control/warm_pool.h"
#include "engine/engine.h"
#include "store/snapshot_store.h"
#include "store/usage_store.h"

namespace kiln::control {

// What a caller wants a snapshot for; each use has its own visibility.
// No use sees a hidden one (store::SnapshotRecord::hidden: an image's warm
// copy, reached through its image, or a paused sandbox's checkpoint).
enum class SnapshotUse {
  // Named by id (get, delete, resize its pool, export, launch a copy) on
  // any front, or listed by kiln's own API: any of the key's, a fork's own
  // capture (temporary) too while its fork runs.
  kRead,
  // One the key took itself, as E2B's and PandaStack's lists show them and
  // as E2B's template ids name them: the key's, not a fork's own capture
  // (kiln took that, the caller never chose it).
  kTaken,
  // Shown as what a sandbox was started from: as kTaken, but whoever's it
  // is (the sandbox is the caller's already).
  kOrigin,
};

class SnapshotCatalogue {
 public:
  // `capacity`: where pooled copies hold room. All outlive the catalogue.
  // `default_pool_size` ready copies are kept for every new snapshot.
  SnapshotCatalogue(engine::Engine& engine, std::string base_rootfs, store::SnapshotStore& store,
                    Capacity& capacity, WarmPoolOptions pool_options, int default_pool_size);

  // Whether a caller whose resources are `scope` (nullopt: an admin, every
  // key's) may use `record` so.
  static bool Visible(const store::SnapshotRecord& record, const std::optional<std::string>& scope,
                      SnapshotUse use);
  // The snapshot `id` if Visible for that use, else nullopt.
  std::optional<store::SnapshotRecord> FindVisible(const std::string& id,
                                                   const std::optional<std::string>& scope,
                                                   SnapshotUse use) const;
  // Those Visible for that use, oldest first.
  std::vector<store::SnapshotRecord> ListVisible(const std::optional<std::string>& scope,
                                                 SnapshotUse use) const;

  // Any snapshot, hidden ones too (for kiln's own bookkeeping).
  std::optional<store::SnapshotRecord> Find(const std::string& id) const;
  // Every one not hidden, every key's, oldest first.
  std::vector<store::SnapshotRecord> List() const;
  // Deletes a snapshot and its pool; copies already handed out keep
  // running. False if there was none.
  bool Delete(const std::string& id);
  // Deletes the snapshots past their expiry, and their pools; their ids.
  std::vector<std::string> DeleteExpired(int64_t now_ms);

  // A snapshot just captured (sealed in the store): metered from now, and
  // given the default pool if `pooled`.
  void Captured(const store::SnapshotRecord& record, bool pooled);
  // A snapshot just imported into the store: the same as a fresh capture.
  void Imported(const store::SnapshotRecord& record);

  // Warm pools.
  PoolStatus PoolOf(const std::string& id) { return pool_.StatusOf(id); }
  std::map<std::string, PoolStatus> Pools() { return pool_.StatusAll(); }  // by snapshot id
  // Pins a snapshot's pool at `size` (0 = none); nullopt gives it back to
  // demand.
  void ResizePool(const std::string& id, std::optional<int> size) { pool_.Resize(id, size); }
  const WarmPoolOptions& pool_options() const { return pool_options_; }
  // The pools themselves, for the creates that take their copies.
  WarmPool& pool() { return pool_; }

  // Where snapshots are kept (captures write here; store/snapshot_transfer.h
  // moves them between hosts).
  store::SnapshotStore& store() { return store_; }
  // The daemon's base image root: what a snapshot without an image ran on.
  const std::string& base_rootfs() const { return base_rootfs_; }

  // Storage metering. A pause checkpoint is metered as its sandbox's (the
  // manager reads TakeMeteredSince); every other snapshot here, by
  // MeterStorage.
  // Starts (or restarts) the snapshot's metering at `at_ms`.
  void MarkMetered(const std::string& id, int64_t at_ms);
  void ForgetMetered(const std::string& id);
  // When the snapshot was last metered (`now_ms` if it is not metered),
  // and marks it metered until `now_ms`.
  int64_t TakeMeteredSince(const std::string& id, int64_t now_ms);
  // The ledger rows of every stored snapshot billed as one, since it was
  // last metered (a new one: at most a minute back), marked metered until
  // `now_ms`. An image's warm copy is billed as its image, a fork's own
  // capture never; marks of snapshots gone are dropped.
  std::vector<store::UsageRow> MeterStorage(int64_t now_ms, const PriceTable& prices);

 private:
  store::SnapshotStore& store_;
  const std::string base_rootfs_;
  const WarmPoolOptions pool_options_;
  const int default_pool_size_;
  WarmPool pool_;
  std::mutex metered_mu_;
  std::map<std::string, int64_t> metered_ms_;  // snapshot id -> last metered
};

}  // namespace kiln::control
