#include "control/sandbox_manager.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <set>
#include <system_error>

#include "common/ids.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "control/snapshot_copy.h"
#include "engine/agent_client.h"

using nlohmann::json;

namespace kiln::control {

namespace {
constexpr size_t kKeepStopped = 1000;         // stopped sandboxes still listed
constexpr int64_t kLeaseCapMs = 3600 * 1000;  // :extend moves a lease at most 1 h ahead
// See engine::kStartupCpuWeight. A first command costs 10-110 ms of CPU.
constexpr int64_t kStartupBoostMs = 5000;
constexpr uint64_t kStartupBoostCpuNs = 150'000'000;
}  // namespace

SandboxManager::SandboxManager(ManagerDeps deps, ManagerOptions options)
    : engine_(deps.engine),
      rootfs_(std::move(deps.rootfs)),
      snapshots_(deps.snapshots),
      records_(deps.records),
      usage_(deps.usage),
      capacity_(deps.capacity),
      egress_(deps.egress),
      options_(std::move(options)),
      pool_(engine_, rootfs_, snapshots_, options_.pool, &capacity_) {
  Recover();
  pool_.LoadPins();  // after Recover, which destroys every copy it did not start
  lease_thread_ = std::jthread([this](std::stop_token stop) { LeaseLoop(stop); });
  meter_thread_ = std::jthread([this](std::stop_token stop) { MeterLoop(stop); });
}

SandboxManager::~SandboxManager() {
  lease_thread_.request_stop();
  meter_thread_.request_stop();
  lease_thread_.join();
  meter_thread_.join();
  Shutdown("host_stopped");
  // Stops begun on their own threads use this manager: wait them out.
  std::unique_lock lock(mu_);
  background_cv_.wait(lock, [&] { return background_stops_ == 0; });
}

void SandboxManager::Shutdown(const std::string& reason) {
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  capacity_.Close();
  {
    // Starting takes seconds at most; the bound only keeps a wedged runsc
    // from holding up the exit.
    std::unique_lock lock(mu_);
    created_cv_.wait_for(lock, std::chrono::seconds(60), [&] { return creating_ == 0; });
  }
  // In parallel, a few at a time: a daemon with hundreds of sandboxes must
  // still exit within its service manager's stop timeout.
  // Paused sandboxes stay paused (their checkpoints are on disk), and
  // persistent ones are paused, for the next kilnd to keep.
  auto all = List(ListFilter{});
  std::erase_if(all, [](const auto& s) { return s->state() == SandboxState::kPaused; });
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (size_t w = 0; w < std::min<size_t>(8, all.size()); ++w) {
    workers.emplace_back([&] {
      for (size_t i; (i = next++) < all.size();) {
        const auto& s = all[i];
        if (s->spec().persistent && s->spec().pausable && s->running() &&
            Pause(s, "host_stopped").ok())
          continue;
        Stop(s, reason);
      }
    });
  }
  for (auto& t : workers) t.join();
}

namespace {

// A record from the database, or nullopt (logged) for one that is damaged:
// the daemon starts without it rather than not at all, and the row is left
// as it is for whoever looks into it.
std::optional<SandboxRecord> DecodeRecord(const json& record) {
  try {
    return record.get<SandboxRecord>();
  } catch (const json::exception& e) {
    LogError("skipping an unreadable sandbox record",
             {{"sandboxId", record.is_object() ? record.value("id", json()) : json()},
              {"error", e.what()}});
    return std::nullopt;
  }
}

}  // namespace

void SandboxManager::Recover() {
  std::set<std::string> adopted;
  for (const auto& record : records_.Live()) {
    auto decoded = DecodeRecord(record);
    if (!decoded) continue;
    auto s = std::make_shared<Sandbox>(std::move(*decoded));
    SetWaker(s);
    SandboxState was = s->state();
    if (was == SandboxState::kPausing || was == SandboxState::kPaused ||
        was == SandboxState::kResuming) {
      {
        std::lock_guard lock(mu_);
        sandboxes_[s->id()] = s;
        order_.push_back(s->id());
      }
      if (RecoverPaused(s)) adopted.insert(s->id());
      continue;
    }
    Status error(Code::kNotRunning,
                 "it was " + std::string(StateName(s->state())) + " when the daemon stopped");
    std::shared_ptr<engine::AgentChannel> conn;
    // Only a sandbox that was fully running can be trusted; one caught
    // starting or stopping is taken down.
    bool looping = s->running() && options_.after_crash &&
                   s->NoteCrashAdoption(StableNowMs(), kCrashLoopWindowMs) >= kCrashLoopAdoptions;
    if (looping) {
      error = Status(Code::kNotRunning, "kilnd ended without a clean stop " +
                                            std::to_string(kCrashLoopAdoptions) +
                                            " times within 10 minutes while it ran");
    } else if (s->running()) {
      Save(*s);  // the adoption counts even if this kilnd crashes too
      auto attached = engine_.Attach(s->id(), s->spec().shape);
      if (attached.ok()) {
        conn = std::move(*attached);
      } else {
        error = attached.status();
      }
    }
    {
      std::lock_guard lock(mu_);
      sandboxes_[s->id()] = s;
      order_.push_back(s->id());
    }
    if (conn) {
      capacity_.Adopt(s->spec().owner, s->spec().shape);
      Track(s, conn);
      adopted.insert(s->id());
      LogInfo("re-adopted a running sandbox",
              {{"event", "sandbox.adopted"}, {"sandboxId", s->id()}});
      continue;
    }
    engine_.Destroy(s->id());
    s->MarkStopping(looping ? "crash_loop" : "host_lost");
    s->MarkStopped(StableNowMs());
    Save(*s);
    LogWarn("sandbox lost while the daemon was down",
            {{"event", "sandbox.lost"}, {"sandboxId", s->id()}, {"error", error.ToString()}});
  }
  DropOrphanCheckpoints();
  // Whatever else the engine has (pooled copies, half-made sandboxes) has
  // no owner any more.
  for (const auto& id : engine_.List()) {
    if (adopted.count(id)) continue;
    LogWarn("removing a sandbox left by an earlier daemon", {{"sandboxId", id}});
    engine_.Destroy(id);
  }
  auto stopped = records_.RecentlyStopped(kKeepStopped);
  std::lock_guard lock(mu_);
  std::vector<std::string> old_order;
  for (const auto& record : stopped) {
    auto decoded = DecodeRecord(record);
    if (!decoded) continue;
    auto s = std::make_shared<Sandbox>(std::move(*decoded));
    if (sandboxes_.count(s->id())) continue;
    sandboxes_[s->id()] = s;
    old_order.push_back(s->id());
  }
  order_.insert(order_.begin(), old_order.begin(), old_order.end());
}

void SandboxManager::StopInBackground(std::shared_ptr<Sandbox> sandbox, std::string reason,
                                      bool remove) {
  {
    std::lock_guard lock(mu_);
    ++background_stops_;
  }
  auto work = [this, sandbox, reason, remove] {
    Stop(sandbox, reason);
    if (remove) Delete(sandbox->id(), std::nullopt);
    std::lock_guard lock(mu_);
    if (--background_stops_ == 0) background_cv_.notify_all();
  };
  try {
    std::thread(work).detach();
  } catch (const std::system_error& e) {
    // No thread to spare (the host is at its limit): stopped here, on the
    // caller's thread, rather than not at all.
    LogWarn("no thread for a stop: stopping in place",
            {{"sandboxId", sandbox->id()}, {"error", e.what()}});
    work();
  }
}

void SandboxManager::Save(const Sandbox& sandbox) {
  try {
    records_.Put(nlohmann::json(sandbox.Record()));
  } catch (const std::exception& e) {
    LogError("cannot record sandbox", {{"sandboxId", sandbox.id()}, {"error", e.what()}});
  }
}

void SandboxManager::Watch(const std::shared_ptr<Sandbox>& sandbox,
                           const std::shared_ptr<engine::AgentChannel>& conn) {
  std::weak_ptr<Sandbox> weak = sandbox;
  std::weak_ptr<engine::AgentChannel> weak_conn = conn;
  conn->OnClose([this, weak, weak_conn] {
    // Called on the channel's reader thread: clean up elsewhere. A channel
    // kiln gave up on (its agent broke the protocol or stopped reading)
    // says why; one the sandbox closed means it died.
    std::string reason;
    if (auto c = weak_conn.lock()) reason = c->close_reason();
    if (auto s = weak.lock(); s && s->running())
      StopInBackground(s, reason.empty() ? "sandbox_died" : reason);
  });
  if (egress_)
    sandbox->SetGate(egress::Gate::Open(*egress_, sandbox->id(), conn, sandbox->network()));
}

void SandboxManager::Track(const std::shared_ptr<Sandbox>& sandbox,
                           std::shared_ptr<engine::AgentChannel> conn) {
  Watch(sandbox, conn);
  sandbox->MarkRunning(std::move(conn), StableNowMs());
}

Result<int64_t> SandboxManager::SetNetwork(const std::shared_ptr<Sandbox>& sandbox,
                                           const network::Policy& policy) {
  SandboxState state = sandbox->state();
  if (state == SandboxState::kStopping || state == SandboxState::kStopped)
    return sandbox->RequireRunning();
  int64_t version = sandbox->SetNetwork(policy, NowMs());
  Save(*sandbox);
  LogInfo("network policy set", {{"event", "sandbox.network"},
                                 {"sandboxId", sandbox->id()},
                                 {"version", version},
                                 {"policy", policy.ToJson()}});
  return version;
}

namespace {

// A create refused because kilnd is stopping: clients retry elsewhere.
Status ShuttingDown() {
  return Status(Code::kShuttingDown, "kilnd is shutting down; retry against its successor")
      .WithRetryAfter(1);
}

}  // namespace

Status SandboxManager::NameTaken(const std::string& name, const std::string& holder) {
  return Status(
      Code::kNameTaken,
      "body.name: a live sandbox of this key is already named " + name + " (" + holder + ")",
      nlohmann::json{{"sandboxId", holder}, {"name", name}});
}

Result<std::shared_ptr<Sandbox>> SandboxManager::Create(SandboxSpec spec, Deadline deadline,
                                                        const std::function<bool()>& cancelled) {
  std::optional<store::SnapshotRecord> from;
  if (spec.snapshot) {
    from = snapshots_.Get(*spec.snapshot);
    if (!from) return Status(Code::kSnapshotNotFound, "snapshot " + *spec.snapshot + " not found");
    if (from->mode == store::SnapshotMode::kMemory) {
      spec.shape = from->shape;  // a restore has the shape of what it copies
    } else {
      // A disk copy boots fresh: at the snapshot's shape unless the create
      // names another, with at least the disk its files were taken from.
      if (!spec.shape_given.vcpu) spec.shape.vcpu = from->shape.vcpu;
      if (!spec.shape_given.memory) spec.shape.memory_mib = from->shape.memory_mib;
      if (!spec.shape_given.disk) spec.shape.disk_mib = from->shape.disk_mib;
      spec.run_as = from->run_as;  // nothing of the source's agent is restored
      if (spec.shape.disk_mib < from->shape.disk_mib)
        return Status(Code::kInvalidRequest, "body.diskMiB: a copy of disk snapshot " + from->id +
                                                 " needs at least " +
                                                 std::to_string(from->shape.disk_mib) +
                                                 " MiB, the disk it was taken from");
    }
    // It runs the same image: a copy needs the root it was captured on.
    spec.image = from->image;
    spec.rootfs = from->rootfs;
    // A copy of a sandbox without sudo stays without it (a grader's guard).
    if (from->sudo_off) spec.sudo = false;
    if (spec.labels.empty()) spec.labels = from->labels;
    if (!spec.network && !from->network.is_null()) {
      network::PolicyError error;
      spec.network = network::ParsePolicy(from->network, "network", &error);
    }
  }
  if (spec.max_cost_micros) {
    int64_t worst = MaxLeaseCostMicros(options_.prices, spec.shape, spec.timeout_seconds);
    if (worst > *spec.max_cost_micros)
      return Status(Code::kBudgetExceeded, "the first lease at full CPU would cost " +
                                               std::to_string(worst) +
                                               " micro-dollars, over maxCostMicros " +
                                               std::to_string(*spec.max_cost_micros));
  }
  if (spec.name) {
    if (auto holder = FindByName(spec.owner, *spec.name))
      return NameTaken(*spec.name, holder->id());
  }
  int64_t queued_at = MonotonicNowMs();
  // A ready pooled copy holds its room already: taking it needs none more.
  // A copy was verified when it was restored.
  std::optional<PooledCopy> pooled;
  // (A disk copy at a shape of its own is not the pool's.)
  if (from && from->shape == spec.shape) {
    pool_.Arrived(from->id, from->image_warm);  // its pool follows demand
    if (capacity_.KeyHasRoom(spec.owner)) pooled = pool_.Take(from->id, spec.owner);
    // Whether pools keep up with creates (a restore is what a miss costs).
    metrics::Inc("kiln_pool_creates_total",
                 {{"snapshot", from->id}, {"from", pooled ? "pool" : "restore"}});
  }
  switch (pooled ? Capacity::Result::kGranted
                 : capacity_.Acquire(spec.owner, spec.shape, deadline, cancelled)) {
    case Capacity::Result::kGranted:
      break;
    case Capacity::Result::kNeverFits:
      return Status(Code::kInvalidRequest,
                    "body.memoryMiB/vcpu: the shape is more than this host can ever run");
    case Capacity::Result::kQuotaExceeded:
      return Status(Code::kQuotaExceeded, "this key already runs its limit of " +
                                              std::to_string(capacity_.limits().key_sandboxes) +
                                              " sandboxes")
          .WithRetryAfter(capacity_.RetryAfterSeconds());
    case Capacity::Result::kLineFull:
      return Status(Code::kRateLimited, "this key already has " +
                                            std::to_string(capacity_.limits().key_waiting) +
                                            " creates waiting for room (--key-waiting-creates)")
          .WithRetryAfter(capacity_.RetryAfterSeconds());
    case Capacity::Result::kNoCapacity:
      if (std::lock_guard lock(mu_); closing_) return ShuttingDown();
      return Status(Code::kNoCapacity, "the host is full; retry later or wait longer")
          .WithRetryAfter(capacity_.RetryAfterSeconds());
  }
  {
    std::lock_guard lock(mu_);
    if (closing_) {
      capacity_.Release(spec.owner, spec.shape);
      if (pooled) engine_.Destroy(pooled->id);
      return ShuttingDown();
    }
    ++creating_;
  }
  struct CreateDone {
    SandboxManager* m;
    ~CreateDone() {
      std::lock_guard lock(m->mu_);
      if (--m->creating_ == 0) m->created_cv_.notify_all();
    }
  } done{this};
  int64_t waited_ms = MonotonicNowMs() - queued_at;
  metrics::Observe("kiln_capacity_wait_seconds", {}, static_cast<double>(waited_ms) / 1000.0);
  // Files hashed once (at seal or an earlier restore) are not hashed again
  // while unchanged (SnapshotStore), so this costs a stat per file.
  if (from && !pooled) {
    if (Status intact = snapshots_.Verify(from->id); !intact.ok()) {
      capacity_.Release(spec.owner, spec.shape);
      return intact;
    }
  }
  auto sandbox =
      std::make_shared<Sandbox>(pooled ? pooled->id : NewUuid(), std::move(spec), StableNowMs());
  SetWaker(sandbox);
  {
    std::lock_guard lock(mu_);
    // Checked again where it counts: two creates of one name may both have
    // passed the first check while waiting for room.
    if (const auto& name = sandbox->spec().name) {
      for (const auto& [id, other] : sandboxes_) {
        if (other->spec().owner == sandbox->spec().owner && other->spec().name == name &&
            other->state() != SandboxState::kStopped) {
          capacity_.Release(sandbox->spec().owner, sandbox->spec().shape);
          if (pooled) engine_.Destroy(pooled->id);
          return NameTaken(*name, id);
        }
      }
    }
    sandboxes_[sandbox->id()] = sandbox;
    order_.push_back(sandbox->id());
  }
  Save(*sandbox);  // "starting": a restart knows to look for it
  int64_t t0 = MonotonicNowMs();
  const SandboxSpec& s = sandbox->spec();
  engine::CreateParams params{sandbox->id(), s.shape, s.rootfs.empty() ? rootfs_ : s.rootfs,
                              engine::kCpuWeight, s.run_as};
  Result<std::shared_ptr<engine::AgentChannel>> started =
      pooled ? Result<std::shared_ptr<engine::AgentChannel>>(pooled->channel)
      : from ? StartCopy(engine_, params, *from, snapshots_.CheckpointDir(from->id),
                         options_.pool.warm_copies)
             : engine_.Create(params);
  if (!started.ok()) {
    sandbox->MarkStopping("startup_failed");
    sandbox->MarkStopped(StableNowMs());
    capacity_.Release(sandbox->spec().owner, sandbox->spec().shape);
    Save(*sandbox);
    const std::string& error = started.status().message();
    LogError("sandbox failed to start", {{"sandboxId", sandbox->id()}, {"error", error}});
    return Status(Code::kStartupFailed, "the sandbox failed to start: " + error);
  }
  std::shared_ptr<engine::AgentChannel> conn = std::move(*started);
  // The sudo shim as asked: a fresh agent has it on, a restored one as its
  // source had it.
  if (!s.sudo || (from && from->sudo_off)) {
    if (Status set = engine::AgentClient(conn).Configure(s.sudo); !set.ok()) {
      engine_.Destroy(sandbox->id());
      sandbox->MarkStopping("startup_failed");
      sandbox->MarkStopped(StableNowMs());
      capacity_.Release(s.owner, s.shape);
      Save(*sandbox);
      return Status(Code::kStartupFailed, "the sandbox's sudo could not be set: " + set.message());
    }
  }
  // Metering starts now: CPU a pooled copy used while waiting is not the user's.
  Meter m;
  m.cpu_ns = engine_.GetUsage(sandbox->id()).cpu_ns;
  m.at_ms = StableNowMs();
  sandbox->SetMeter(m);
  // The engine restored it boosted.
  if (from && from->mode == store::SnapshotMode::kMemory) sandbox->BeginStartupBoost(m.cpu_ns);
  Track(sandbox, conn);
  Save(*sandbox);
  LogInfo("sandbox started", {{"event", "sandbox.running"},
                              {"sandboxId", sandbox->id()},
                              {"owner", sandbox->spec().owner},
                              {"snapshotId", from ? json(from->id) : json(nullptr)},
                              {"pooled", pooled.has_value()},
                              {"queuedMs", waited_ms},
                              {"startMs", MonotonicNowMs() - t0}});
  return sandbox;
}

Result<store::SnapshotRecord> SandboxManager::Snapshot(const std::shared_ptr<Sandbox>& sandbox,
                                                       const SnapshotOptions& options) {
  if (Status running = sandbox->RequireRunning(); !running.ok()) return running;
  // A disk capture stops nothing: it needs no pausable sandbox.
  if (!sandbox->spec().pausable && options.mode == store::SnapshotMode::kMemory)
    return Status(Code::kNotPausable, "sandbox " + sandbox->id() +
                                          " was created with pausable: false: it cannot be "
                                          "snapshotted or forked");
  return Capture(sandbox, options);
}

Result<store::SnapshotRecord> SandboxManager::Capture(const std::shared_ptr<Sandbox>& sandbox,
                                                      const SnapshotOptions& options,
                                                      const std::string& paused_sandbox) {
  store::SnapshotRecord rec;
  rec.id = NewUuid();
  rec.owner = sandbox->spec().owner;
  rec.name = options.name;
  rec.labels = options.labels.empty() ? sandbox->spec().labels : options.labels;
  rec.source_sandbox_id = sandbox->id();
  rec.shape = sandbox->spec().shape;
  rec.retention_days = options.retention_days;
  rec.network = sandbox->network().ToJson();
  rec.image = sandbox->spec().image;
  rec.rootfs = sandbox->spec().rootfs;
  rec.image_warm = options.image_warm;
  rec.temporary = options.temporary;
  rec.sudo_off = !sandbox->spec().sudo;
  rec.paused_sandbox = paused_sandbox;
  rec.mode = options.mode;
  rec.run_as = sandbox->spec().run_as;
  auto captured = rec.mode == store::SnapshotMode::kDisk
                      ? CaptureDisk(engine_, sandbox->id(), snapshots_.CheckpointDir(rec.id))
                      : engine_.Checkpoint(sandbox->id(), snapshots_.CheckpointDir(rec.id));
  if (!captured.ok()) {
    snapshots_.Discard(rec.id);
    // A sandbox that stopped meanwhile is the cause, not the capture.
    SandboxState now = sandbox->state();
    if (now != SandboxState::kRunning && now != SandboxState::kPausing)
      return Status(Code::kNotRunning, captured.status().message());
    return captured.status();
  }
  const engine::CheckpointStats& stats = *captured;
  rec.created_ms = StableNowMs();
  // A pause checkpoint lives as long as its sandbox is paused.
  rec.expires_ms = paused_sandbox.empty()
                       ? rec.created_ms + static_cast<int64_t>(rec.retention_days) * 86400000
                       : std::numeric_limits<int64_t>::max();
  rec.size_bytes = stats.bytes;
  rec.capture_ms = stats.duration_ms;
  if (Status sealed = snapshots_.Seal(rec); !sealed.ok()) return sealed;
  {
    std::lock_guard lock(mu_);
    snapshot_metered_ms_[rec.id] = rec.created_ms;
  }
  if (options_.default_pool_size > 0 && options.pool && paused_sandbox.empty())
    pool_.Resize(rec.id, options_.default_pool_size);
  LogInfo("snapshot ready", {{"event", "snapshot.ready"},
                             {"snapshotId", rec.id},
                             {"sandboxId", sandbox->id()},
                             {"captureMs", stats.duration_ms},
                             {"bytes", stats.bytes}});
  return rec;
}

ForkResult SandboxManager::Fork(const std::shared_ptr<Sandbox>& source, const ForkOptions& options,
                                Deadline deadline) {
  SnapshotOptions opts;
  opts.labels = options.labels;
  opts.retention_days = 1;
  opts.pool = false;  // the fork's own snapshot serves only this fork
  opts.temporary = !options.keep_snapshot;
  auto snap = Snapshot(source, opts);
  if (!snap.ok()) return ForkResult{{}, snap.status()};
  size_t count = static_cast<size_t>(options.count);
  std::vector<std::optional<Result<std::shared_ptr<Sandbox>>>> made(count);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      SandboxSpec spec;
      spec.owner = source->spec().owner;
      spec.snapshot = snap->id;
      spec.labels = options.labels.empty() ? source->spec().labels : options.labels;
      if (options.name)
        spec.name = i == 0 ? *options.name : *options.name + "-" + std::to_string(i);
      spec.env = source->spec().env;
      spec.timeout_seconds = source->spec().timeout_seconds;
      const SandboxSpec& from = source->spec();
      spec.pausable = from.pausable;
      spec.idle_pause_seconds = from.idle_pause_seconds;
      spec.auto_wake = from.auto_wake;
      spec.pause_on_lease_end = from.pause_on_lease_end;
      spec.delete_on_lease_end = from.delete_on_lease_end;
      spec.sudo = from.sudo;
      spec.max_total_cost_micros = from.max_total_cost_micros;
      spec.network = options.network ? options.network : source->network();
      made[i] = Create(std::move(spec), deadline);
    });
  }
  for (auto& t : threads) t.join();
  if (!options.keep_snapshot) DeleteSnapshot(snap->id);
  ForkResult result;
  if (options.keep_snapshot) result.kept = *snap;
  for (auto& m : made) {
    if (m->ok()) {
      result.copies.push_back(std::move(m->value()));
    } else {
      result.status = m->status();
    }
  }
  return result;
}

std::shared_ptr<Sandbox> SandboxManager::Get(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  return it == sandboxes_.end() ? nullptr : it->second;
}

std::shared_ptr<Sandbox> SandboxManager::FindByName(const std::string& owner,
                                                    const std::string& name) const {
  std::lock_guard lock(mu_);
  for (const auto& [id, s] : sandboxes_) {
    if (s->spec().owner == owner && s->spec().name == name && s->state() != SandboxState::kStopped)
      return s;
  }
  return nullptr;
}

std::vector<std::shared_ptr<Sandbox>> SandboxManager::List(const ListFilter& f) const {
  std::vector<std::shared_ptr<Sandbox>> out;
  std::lock_guard lock(mu_);
  for (const auto& id : order_) {
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end()) continue;
    const auto& s = it->second;
    if (f.owner && s->spec().owner != *f.owner) continue;
    if (f.name && s->spec().name != f.name) continue;
    SandboxState state = s->state();
    if (f.states.empty()) {
      if (state == SandboxState::kStopped && !f.include_stopped) continue;
    } else if (std::find(f.states.begin(), f.states.end(), state) == f.states.end()) {
      continue;
    }
    bool match = true;
    for (const auto& [k, v] : f.labels) {
      auto l = s->spec().labels.find(k);
      if (l == s->spec().labels.end() || l->second != v) match = false;
    }
    if (match) out.push_back(s);
  }
  return out;
}

std::map<SandboxState, int> SandboxManager::CountByState() const {
  std::map<SandboxState, int> counts{{SandboxState::kStarting, 0},
                                     {SandboxState::kRunning, 0},
                                     {SandboxState::kStopping, 0},
                                     {SandboxState::kPaused, 0}};
  std::lock_guard lock(mu_);
  for (const auto& [id, s] : sandboxes_) {
    SandboxState st = s->state();
    if (st != SandboxState::kStopped) ++counts[st];
  }
  return counts;
}

Result<int64_t> SandboxManager::Extend(const std::shared_ptr<Sandbox>& sandbox, int64_t seconds) {
  if (Status running = sandbox->RequireRunning(); !running.ok()) return running;
  int64_t end = sandbox->Extend(seconds, StableNowMs(), kLeaseCapMs);
  Save(*sandbox);
  LogInfo("lease extended", {{"event", "sandbox.extended"},
                             {"sandboxId", sandbox->id()},
                             {"expiresAt", FormatTime(end)}});
  return end;
}

void SandboxManager::Stop(const std::shared_ptr<Sandbox>& sandbox, const std::string& reason) {
  std::optional<SandboxState> left;
  while (!(left = sandbox->MarkStopping(reason))) {
    // Someone else is stopping it (wait until they are done), or a pause or
    // wake is under way (wait for it to settle, then stop what it left).
    if (sandbox->state() == SandboxState::kStopped) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Save(*sandbox);
  if (*left == SandboxState::kPaused) {
    // Nothing of it runs: only its checkpoint is left, and capacity was
    // given back when it paused.
    std::string checkpoint = sandbox->Record().checkpoint;
    Accumulate(MeterPaused(*sandbox, StableNowMs()));
    if (!checkpoint.empty()) snapshots_.Delete(checkpoint);
    sandbox->MarkStopped(StableNowMs());
    Flush(StableNowMs(), false, sandbox->id());
    Save(*sandbox);
    LogInfo("paused sandbox stopped",
            {{"event", "sandbox.stopped"}, {"sandboxId", sandbox->id()}, {"reason", reason}});
    return;
  }
  // The channel ended with MarkStopping (nothing here waits on the agent);
  // egress is cut, then the engine takes the sandbox down from the host.
  // No more egress: cut its connections before the sandbox goes away.
  if (auto gate = sandbox->TakeGate()) gate->Close();
  // The last reading, while its cgroup still exists.
  Accumulate(MeterOne(*sandbox, StableNowMs()));
  engine_.Destroy(sandbox->id());
  sandbox->MarkStopped(StableNowMs());
  capacity_.Release(sandbox->spec().owner, sandbox->spec().shape);
  Flush(StableNowMs(), false, sandbox->id());
  Save(*sandbox);
  LogInfo("sandbox stopped", {{"event", "sandbox.stopped"},
                              {"sandboxId", sandbox->id()},
                              {"reason", reason},
                              {"chargedMicros", static_cast<int64_t>(sandbox->meter().micros)}});
  std::lock_guard lock(mu_);
  // Forget the oldest stopped ones beyond what listings keep.
  size_t stopped = 0;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    auto s = sandboxes_.find(*it);
    if (s != sandboxes_.end() && s->second->state() == SandboxState::kStopped &&
        ++stopped > kKeepStopped) {
      sandboxes_.erase(s);
    }
  }
  std::erase_if(order_, [&](const std::string& id) { return !sandboxes_.count(id); });
}

std::optional<DeletedSandbox> SandboxManager::Delete(const std::string& id,
                                                     const std::optional<std::string>& owner) {
  auto s = Get(id);
  if (!s) {
    std::lock_guard lock(mu_);
    auto it = deleted_.find(id);
    if (it == deleted_.end() || (owner && it->second.record.spec.owner != *owner))
      return std::nullopt;
    return it->second;
  }
  if (owner && s->spec().owner != *owner) return std::nullopt;
  Stop(s, "requested");
  DeletedSandbox gone{s->Record(), StableNowMs()};
  records_.Remove(id);
  std::lock_guard lock(mu_);
  sandboxes_.erase(id);
  std::erase(order_, id);
  std::erase_if(deleted_,
                [&](const auto& d) { return d.second.deleted_ms < gone.deleted_ms - 86400000; });
  deleted_[id] = gone;
  return gone;
}

bool SandboxManager::DeleteSnapshot(const std::string& id) {
  pool_.Drop(id);
  return snapshots_.Delete(id);
}

void SandboxManager::SnapshotImported(const store::SnapshotRecord& record) {
  {
    std::lock_guard lock(mu_);
    snapshot_metered_ms_[record.id] = StableNowMs();
  }
  if (options_.default_pool_size > 0) pool_.Resize(record.id, options_.default_pool_size);
  LogInfo("snapshot imported", {{"event", "snapshot.imported"},
                                {"snapshotId", record.id},
                                {"owner", record.owner},
                                {"bytes", record.size_bytes}});
}

std::optional<store::SnapshotRecord> SandboxManager::FindSnapshot(const std::string& id) const {
  return snapshots_.Get(id);
}

std::vector<store::SnapshotRecord> SandboxManager::ListSnapshots() const {
  std::vector<store::SnapshotRecord> all = snapshots_.List();
  std::erase_if(all, [](const store::SnapshotRecord& r) { return r.hidden(); });
  return all;
}

PoolStatus SandboxManager::SnapshotPool(const std::string& id) { return pool_.StatusOf(id); }

std::map<std::string, PoolStatus> SandboxManager::Pools() { return pool_.StatusAll(); }

void SandboxManager::ResizePool(const std::string& id, std::optional<int> size) {
  pool_.Resize(id, size);
}

void SandboxManager::CommandFinished(const std::shared_ptr<Sandbox>& sandbox) {
  EndStartupBoost(sandbox);
}

void SandboxManager::EndStartupBoost(const std::shared_ptr<Sandbox>& sandbox) {
  if (sandbox->EndStartupBoost()) engine_.SetCpuWeight(sandbox->id(), engine::kCpuWeight);
}

void SandboxManager::LeaseLoop(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    // 100 ms: also how late a start-up weight may end (see below).
    cv_.wait_for(lock, stop, std::chrono::milliseconds(100), [] { return false; });
    if (stop.stop_requested()) break;
    int64_t now = StableNowMs();
    std::vector<std::shared_ptr<Sandbox>> unboost;
    for (const auto& [id, s] : sandboxes_) {
      if (s->running() && s->boosted()) unboost.push_back(s);
    }
    lock.unlock();
    EnforceLifetimes(now);
    // The start-up weight ends after kStartupBoostMs, or once the sandbox
    // has used kStartupBoostCpuNs: a first command that burns CPU (a hung
    // program under a grader) must not keep 8x the weight of its neighbours.
    for (auto& s : unboost) {
      if (s->ready_ms() + kStartupBoostMs <= now ||
          engine_.GetUsage(s->id()).cpu_ns - s->boost_base_cpu_ns() >= kStartupBoostCpuNs)
        EndStartupBoost(s);
    }
    for (const auto& id : snapshots_.DeleteExpired(now)) {
      pool_.Drop(id);
      LogInfo("snapshot expired", {{"event", "snapshot.expired"}, {"snapshotId", id}});
    }
    lock.lock();
  }
}

}  // namespace kiln::control
