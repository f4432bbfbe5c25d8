// Captures of a running sandbox: a snapshot (into the catalogue), the
// capture a pause keeps (sandbox_pause.cc), and a fork, which snapshots
// its source once and starts the copies from that.
#include <limits>
#include <thread>

#include "common/ids.h"
#include "common/log.h"
#include "common/time.h"
#include "control/sandbox_manager.h"
#include "control/snapshot_copy.h"

namespace kiln::control {

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
  catalogue_.Captured(rec, options.pool && paused_sandbox.empty());
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
  if (!options.keep_snapshot) catalogue_.Delete(snap->id);
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

}  // namespace kiln::control
