// Create: a sandbox from an image or from a snapshot (a pooled copy when
// one is ready, else a restore), once capacity admits it.
#include <algorithm>

#include "common/ids.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "control/sandbox_manager.h"
#include "control/snapshot_copy.h"
#include "engine/agent_client.h"

namespace kiln::control {

using nlohmann::json;

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
  // The fronts refuse a longer lease naming their field; kilnd's own
  // sandboxes (a build step's) are held to it here.
  spec.timeout_seconds = std::min(spec.timeout_seconds, options_.max_lease_seconds);
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
    catalogue_.pool().Arrived(from->id, from->image_warm);  // its pool follows demand
    if (capacity_.KeyHasRoom(spec.owner)) pooled = catalogue_.pool().Take(from->id, spec.owner);
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

}  // namespace kiln::control
