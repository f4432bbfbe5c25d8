// The table of sandboxes and their lifecycle: create, find, stop, delete,
// and stop at lease end or when a sandbox dies on its own.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "control/sandbox.h"
#include "control/warm_pool.h"
#include "engine/engine.h"
#include "store/snapshot_store.h"

namespace kiln::control {

struct ListFilter {
  std::vector<std::string> states;                          // any of; empty = live ones
  std::vector<std::pair<std::string, std::string>> labels;  // all must match
  bool include_stopped = false;
};

struct SnapshotOptions {
  std::optional<std::string> name;
  std::map<std::string, std::string> labels;
  int retention_days = 7;
  bool pool = true;  // keep the daemon's default pool of ready copies
};

class SandboxManager {
 public:
  // `default_pool_size`: ready copies kept for every new snapshot.
  SandboxManager(engine::Engine& engine, std::string rootfs, store::SnapshotStore& snapshots,
                 int default_pool_size = 0);
  ~SandboxManager();  // stops every sandbox

  // Starts a sandbox (from the image, or from spec.snapshot) and returns it
  // running, or null with *failure set.
  std::shared_ptr<Sandbox> Create(SandboxSpec spec, Failure* failure);

  // Captures a running sandbox; it is paused only while capturing.
  std::optional<store::SnapshotRecord> Snapshot(const std::shared_ptr<Sandbox>& sandbox,
                                                const SnapshotOptions& options, Failure* failure);

  // Snapshots the source once, then starts `count` copies in parallel. The
  // snapshot is deleted afterwards unless keep_snapshot. Copies that started
  // are returned even when others failed (then *failure is set).
  std::vector<std::shared_ptr<Sandbox>> Fork(const std::shared_ptr<Sandbox>& source, int count,
                                             const std::map<std::string, std::string>& labels,
                                             bool keep_snapshot, Failure* failure);

  store::SnapshotStore& snapshots() { return snapshots_; }
  WarmPool& pool() { return pool_; }
  // Deletes a snapshot and its pool; copies already handed out keep running.
  bool DeleteSnapshot(const std::string& id);
  std::shared_ptr<Sandbox> Get(const std::string& id) const;
  std::vector<std::shared_ptr<Sandbox>> List(const ListFilter& filter) const;
  // Stops it synchronously: when this returns nothing of it is on the host.
  void Stop(const std::shared_ptr<Sandbox>& sandbox, const std::string& reason);
  // Stops and forgets it; returns its last info, also for a repeated
  // delete (kept for a day). Null if never known.
  std::optional<nlohmann::json> Delete(const std::string& id);

 private:
  void LeaseLoop();

  engine::Engine& engine_;
  const std::string rootfs_;
  store::SnapshotStore& snapshots_;
  const int default_pool_size_;
  WarmPool pool_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes_;
  std::vector<std::string> order_;  // creation order, for listing
  std::map<std::string, std::pair<int64_t, nlohmann::json>> deleted_;  // id -> (when, answer)
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread lease_thread_;
};

}  // namespace kiln::control
