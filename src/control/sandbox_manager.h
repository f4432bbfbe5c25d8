// The table of sandboxes and their lifecycle: create (after capacity
// admits it), snapshot, pause and wake, fork, find, stop, delete; stop at
// lease end or when a sandbox dies on its own; meter what each one uses;
// and, after a daemon restart, re-adopt the sandboxes that kept running.
//
// Every lifecycle change is written to the durable sandbox table before it
// is answered, so a kill -9 of kilnd at any moment leaves a record of every
// sandbox it may have started.
//
// It owns the two things a lifecycle change touches besides the table and
// hands them out by accessor: the snapshot catalogue with its warm pools
// (snapshots(): a capture adds to it, a create takes its copies, a pause
// keeps its checkpoint there) and the usage ledger (usage(): every stop,
// pause and wake ends a metered interval there).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/contract.h"
#include "control/capacity.h"
#include "control/metering.h"
#include "control/sandbox.h"
#include "control/snapshot_catalogue.h"
#include "control/usage_ledger.h"
#include "control/warm_pool.h"
#include "engine/engine.h"
#include "store/sandbox_store.h"
#include "store/snapshot_store.h"
#include "store/usage_store.h"

namespace kiln::control {

// What runs the sandboxes (runsc and its version), as the fronts see it.
using EngineInfo = engine::EngineInfo;

struct ListFilter {
  std::vector<SandboxState> states;                         // any of; empty = live ones
  std::vector<std::pair<std::string, std::string>> labels;  // all must match
  bool include_stopped = false;
  std::optional<std::string> owner;  // only this key's; nullopt = everyone's
  std::optional<std::string> name;   // only sandboxes of this name
};

struct SnapshotOptions {
  std::optional<std::string> name;
  std::map<std::string, std::string> labels;
  int retention_days = 7;
  bool pool = true;         // keep the daemon's default pool of ready copies
  bool image_warm = false;  // an image's warm copy (store::SnapshotRecord::image_warm)
  bool temporary = false;   // a fork's own (store::SnapshotRecord::temporary)
  store::SnapshotMode mode = store::SnapshotMode::kMemory;
};

struct ManagerOptions {
  int default_pool_size = 0;     // ready copies kept for every new snapshot
  WarmPoolOptions pool;          // demand-sized pools, their budget, pins
  int meter_interval_ms = 5000;  // how often running sandboxes are metered
  PriceTable prices;
  // The kilnd before this one ended without a clean stop (it crashed or
  // was killed): re-adoptions count towards the crash-loop limit.
  bool after_crash = false;
  // --max-lease-seconds: the longest lease a create or wake may ask for, and
  // how far past now an extend may move one.
  int max_lease_seconds = static_cast<int>(contract::kTimeoutSeconds.max);
};

// A sandbox re-adopted this many times after crashes of kilnd within the
// window is stopped (`crash_loop`) instead: whatever it does to kilnd,
// kilnd does not go on reconnecting to it.
inline constexpr size_t kCrashLoopAdoptions = 3;
inline constexpr int64_t kCrashLoopWindowMs = 600000;

// What the manager works with; all outlive it.
struct ManagerDeps {
  engine::Engine& engine;
  std::string rootfs;
  store::SnapshotStore& snapshots;
  store::SandboxStore& records;
  store::UsageStore& usage;
  Capacity& capacity;
  // Carries the sandboxes' egress; null = no egress (unit tests).
  egress::EgressService* egress = nullptr;
};

struct ForkOptions {
  int count = 1;
  std::map<std::string, std::string> labels;  // empty = the source's
  bool keep_snapshot = false;
  std::optional<network::Policy> network;  // unset = the source's rules
  // Names the copies name, name-1, name-2, ... (unset: no names).
  std::optional<std::string> name;
};

// Copies that started, and why the others did not (OK if all did).
struct ForkResult {
  std::vector<std::shared_ptr<Sandbox>> copies;
  Status status;
  std::optional<store::SnapshotRecord> kept;  // keep_snapshot: the snapshot kept
};

// What :update changes; unset members stay as they are.
struct SandboxUpdate {
  std::optional<std::optional<std::string>> name;  // a name, or none (nullopt inside)
  std::optional<std::map<std::string, std::string>> labels;
  std::map<std::string, std::optional<std::string>> env;  // set, or remove (nullopt)
  std::optional<bool> auto_wake;
  std::optional<int> idle_pause_seconds;
  std::optional<bool> persistent;
  std::optional<std::optional<int64_t>> max_total_cost_micros;
};

// A deleted sandbox's last record, kept a day so a repeated delete answers
// the same.
struct DeletedSandbox {
  SandboxRecord record;
  int64_t deleted_ms = 0;
};

using Deadline = std::chrono::steady_clock::time_point;

class SandboxManager {
 public:
  // Re-adopts the sandboxes of the durable table that still run, marks the
  // rest stopped (stopReason host_lost) and removes anything else the
  // engine has on the host.
  SandboxManager(ManagerDeps deps, ManagerOptions options);
  ~SandboxManager();  // stops every sandbox

  // Starts a sandbox (from the image, or from spec.snapshot) once capacity
  // admits it -- waiting in line until `deadline` -- and returns it running.
  // Fails with kSnapshotNotFound, kBudgetExceeded, kNoCapacity,
  // kQuotaExceeded, kInvalidRequest (a shape the host can never run),
  // kShuttingDown, kSnapshotCorrupted or kStartupFailed.
  // `cancelled` is polled while waiting (the client hung up).
  Result<std::shared_ptr<Sandbox>> Create(SandboxSpec spec, Deadline deadline,
                                          const std::function<bool()>& cancelled = nullptr);

  // Captures a running sandbox; it is paused only while capturing.
  // kNotRunning or kSnapshotFailed.
  Result<store::SnapshotRecord> Snapshot(const std::shared_ptr<Sandbox>& sandbox,
                                         const SnapshotOptions& options);

  // Checkpoints a running sandbox to disk (files, memory, processes; with
  // `memory` false, or its spec's pause_memory false, only its files) and
  // frees its memory, CPU and capacity: it is paused, its lease clock
  // stopped, billed only for the checkpoint's bytes. `reason` shows as its
  // stopReason while paused. kNotRunning, kNotPausable, or kSnapshotFailed
  // with the sandbox still running. Pausing a paused one is OK.
  Status Pause(const std::shared_ptr<Sandbox>& sandbox, const std::string& reason,
               std::optional<bool> memory = std::nullopt);
  // Restores a paused sandbox under the same id once capacity admits it
  // (a files-only pause boots afresh from its files; waiting until
  // `deadline`), with its lease: `timeout_seconds`, else the
  // larger of what it had left and its own timeoutSeconds. kNotPaused,
  // kNotRunning (stopped), the capacity refusals, kSnapshotCorrupted (the
  // checkpoint is kept for inspection and it stays paused), kStartupFailed.
  Status Wake(const std::shared_ptr<Sandbox>& sandbox, std::optional<int> timeout_seconds,
              Deadline deadline);
  // Changes its settings (commands started afterwards see a new env).
  // kNotRunning once stopped, kNameTaken, kInvalidRequest (persistent or
  // idle pause on an unpausable sandbox, persistent off while paused, or
  // past Sandbox::kMaxSpecVersions updates).
  Status Update(const std::shared_ptr<Sandbox>& sandbox, const SandboxUpdate& update);
  // The key's live (not stopped) sandbox of that name, if any.
  std::shared_ptr<Sandbox> FindByName(const std::string& owner, const std::string& name) const;

  // Snapshots the source once, then starts the copies in parallel. The
  // snapshot is deleted afterwards unless keep_snapshot. Copies that started
  // are returned even when others failed.
  ForkResult Fork(const std::shared_ptr<Sandbox>& source, const ForkOptions& options,
                  Deadline deadline);

  // The snapshots, who may see which, and their warm pools.
  SnapshotCatalogue& snapshots() { return catalogue_; }
  const SnapshotCatalogue& snapshots() const { return catalogue_; }
  // What keys spent: the ledger the meters write to.
  UsageLedger& usage() { return ledger_; }

  std::shared_ptr<Sandbox> Get(const std::string& id) const;
  std::vector<std::shared_ptr<Sandbox>> List(const ListFilter& filter) const;
  // Replaces its egress rules, applies them at once and records them.
  // Returns the new version; kNotRunning once it is stopping.
  Result<int64_t> SetNetwork(const std::shared_ptr<Sandbox>& sandbox,
                             const network::Policy& policy);
  // The leases every front reads (--max-lease-seconds), as an API field.
  contract::IntField lease_seconds() const {
    return contract::LeaseSeconds(options_.max_lease_seconds);
  }
  // Moves its lease end (see Sandbox::Extend) to at most
  // --max-lease-seconds from now, and records it; kNotRunning.
  Result<int64_t> Extend(const std::shared_ptr<Sandbox>& sandbox, int64_t seconds);
  // Stops it synchronously: when this returns nothing of it is on the host.
  void Stop(const std::shared_ptr<Sandbox>& sandbox, const std::string& reason);
  // Stops and forgets it; returns its last record, also for a repeated
  // delete (kept for a day). nullopt if never known, or not `owner`'s when
  // that is given.
  std::optional<DeletedSandbox> Delete(const std::string& id,
                                       const std::optional<std::string>& owner = std::nullopt);
  // Daemon shutdown: refuses creates from now on (those waiting for room
  // too), waits for those already starting, then stops every sandbox, a few
  // at a time. A create that raced with it would leave a sandbox behind.
  void Shutdown(const std::string& reason);
  // Runs after a wake that booted afresh (a files-only pause): what a cold
  // boot of its image runs (launch::Launcher sets it: the start command).
  // Set once, before any wake.
  void OnFreshWake(std::function<void(const std::shared_ptr<Sandbox>&)> hook) {
    fresh_wake_ = std::move(hook);
  }
  // A command of the sandbox has finished: its start-up CPU weight ends.
  void CommandFinished(const std::shared_ptr<Sandbox>& sandbox);
  // What runs the sandboxes (health, metrics).
  engine::EngineInfo EngineInfo() const { return engine_.Info(); }
  // Counts of the sandboxes not stopped, by state (every such state
  // present), for metrics.
  std::map<SandboxState, int> CountByState() const;
  Capacity::Stats CapacityStats() const { return capacity_.stats(); }
  const CapacityLimits& capacity_limits() const { return capacity_.limits(); }
  bool ShapeEverFits(const Shape& shape) const { return capacity_.EverFits(shape); }
  const PriceTable& prices() const { return options_.prices; }
  // Meters every running sandbox and stored snapshot now; with flush_all,
  // writes every pending ledger row (before usage is read).
  void MeterAll(bool flush_all = false);

 private:
  static constexpr size_t kKeepStopped = 1000;  // stopped sandboxes still listed

  void Recover();
  // What a restart does with a sandbox that was pausing, paused or resuming
  // (kill -9 mid-way): it ends running or paused, never lost.
  // True if it runs again (re-adopted).
  bool RecoverPaused(const std::shared_ptr<Sandbox>& s);
  // Deletes pause checkpoints no paused sandbox holds (a pause or wake
  // interrupted by a restart).
  void DropOrphanCheckpoints();
  // The capture shared by Snapshot, Pause and Fork (no state check).
  Result<store::SnapshotRecord> Capture(const std::shared_ptr<Sandbox>& sandbox,
                                        const SnapshotOptions& options,
                                        const std::string& paused_sandbox = "");
  void PauseInBackground(std::shared_ptr<Sandbox> sandbox, std::string reason);
  // Lease end, idle pause, paused expiry and cost caps (the lease loop).
  void EnforceLifetimes(int64_t now_ms);
  // kNameTaken: a live sandbox of the key, `holder`, has the name already.
  static Status NameTaken(const std::string& name, const std::string& holder);
  // Hooks a sandbox's Wake() to this manager (autoWake).
  void SetWaker(const std::shared_ptr<Sandbox>& sandbox);
  // Stops the sandbox when its channel closes (it died) and opens its egress
  // gate on the channel: every way a sandbox comes to run (start, restore,
  // wake, re-adoption) does this before marking it running.
  void Watch(const std::shared_ptr<Sandbox>& sandbox,
             const std::shared_ptr<engine::AgentChannel>& channel);
  // Starts tracking a sandbox that runs: its channel, its death.
  void Track(const std::shared_ptr<Sandbox>& sandbox,
             std::shared_ptr<engine::AgentChannel> channel);
  void Save(const Sandbox& sandbox);
  // Stops it on a thread of its own (lease end, death: noticed on threads
  // that must not wait for a runsc delete); the destructor waits for these.
  // `remove`: then deleted, as DELETE does (onLeaseEnd "delete").
  void StopInBackground(std::shared_ptr<Sandbox> sandbox, std::string reason, bool remove = false);
  // Drops a restored copy's start-up CPU weight (once).
  void EndStartupBoost(const std::shared_ptr<Sandbox>& sandbox);
  // Prices the interval since the sandbox's last reading; the ledger row.
  store::UsageRow MeterOne(Sandbox& sandbox, int64_t now_ms);
  // The same for a paused sandbox: its checkpoint's bytes at the snapshot
  // rate since the last reading.
  store::UsageRow MeterPaused(Sandbox& sandbox, int64_t now_ms);
  void LeaseLoop(std::stop_token stop);
  void MeterLoop(std::stop_token stop);

  engine::Engine& engine_;
  const std::string rootfs_;
  store::SnapshotStore& snapshots_;  // catalogue_.store(): captures and checkpoints
  store::SandboxStore& records_;
  Capacity& capacity_;
  egress::EgressService* egress_;
  const ManagerOptions options_;
  SnapshotCatalogue catalogue_;
  UsageLedger ledger_;
  mutable std::mutex mu_;
  std::mutex meter_mu_;  // one reading at a time, so no interval is billed twice
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes_;
  std::vector<std::string> order_;  // creation order, for listing
  std::map<std::string, DeletedSandbox> deleted_;
  std::condition_variable_any cv_;  // wakes the lease and meter threads
  bool closing_ = false;            // Shutdown began: no more creates
  int creating_ = 0;                // creates past the capacity line, not yet answered
  std::condition_variable created_cv_;
  int background_stops_ = 0;  // StopInBackground threads still running
  std::condition_variable background_cv_;
  std::function<void(const std::shared_ptr<Sandbox>&)> fresh_wake_;
  std::jthread lease_thread_;
  std::jthread meter_thread_;
};

}  // namespace kiln::control
