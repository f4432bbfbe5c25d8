// Pause and wake: a paused sandbox is a checkpoint on disk (a hidden
// snapshot) and its record; nothing of it runs and it holds no capacity.
// Also what pauses or stops sandboxes on their own: lease end, idle time,
// paused expiry and cost caps. What a restart does with a paused sandbox:
// sandbox_recover.cc.
#include <algorithm>
#include <system_error>
#include <thread>

#include "common/log.h"
#include "common/time.h"
#include "control/sandbox_manager.h"
#include "control/snapshot_copy.h"
#include "engine/agent_client.h"

namespace kiln::control {

namespace {
// A non-persistent sandbox left paused is stopped after this long.
constexpr int64_t kPausedRetentionMs = 7 * 86400000LL;
}  // namespace

void SandboxManager::SetWaker(const std::shared_ptr<Sandbox>& sandbox) {
  std::weak_ptr<Sandbox> weak = sandbox;
  sandbox->SetWaker([this, weak]() -> Status {
    auto s = weak.lock();
    if (!s) return Status(Code::kNotRunning, "the sandbox is gone");
    // A pause or wake under way settles within seconds; wait for it.
    for (int i = 0; i < 6000; ++i) {
      SandboxState st = s->state();
      if (st == SandboxState::kRunning) return Status::Ok();
      if (st == SandboxState::kPaused) {
        Status woken =
            Wake(s, std::nullopt, std::chrono::steady_clock::now() + std::chrono::seconds(60));
        // Someone else woke it meanwhile: fine.
        if (woken.ok() || woken.code() == Code::kNotPaused) continue;
        return woken;
      }
      if (st != SandboxState::kPausing && st != SandboxState::kResuming) return s->RequireRunning();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return s->RequireRunning();
  });
}

Status SandboxManager::Pause(const std::shared_ptr<Sandbox>& sandbox, const std::string& reason,
                             std::optional<bool> memory) {
  SandboxState st = sandbox->state();
  // A stopped sandbox is refused for that first, whatever its settings.
  if (st == SandboxState::kStopping || st == SandboxState::kStopped)
    return sandbox->RequireRunning();
  if (!sandbox->spec().pausable)
    return Status(Code::kNotPausable,
                  "sandbox " + sandbox->id() + " was created with pausable: false");
  if (!sandbox->MarkPausing()) {
    if (sandbox->state() == SandboxState::kPaused) return Status::Ok();
    return sandbox->RequireRunning();
  }
  Save(*sandbox);
  int64_t t0 = MonotonicNowMs();
  SnapshotOptions opts;
  opts.pool = false;
  opts.retention_days = 0;
  if (!memory.value_or(sandbox->spec().pause_memory)) opts.mode = store::SnapshotMode::kDisk;
  auto captured = Capture(sandbox, opts, sandbox->id());
  if (!captured.ok()) {
    sandbox->MarkPauseFailed();
    Save(*sandbox);
    LogWarn("pause failed; the sandbox keeps running",
            {{"sandboxId", sandbox->id()}, {"error", captured.status().ToString()}});
    return captured.status();
  }
  // The last CPU reading while its cgroup exists; from now on only the
  // checkpoint's bytes are billed.
  ledger_.Accumulate(MeterOne(*sandbox, StableNowMs()));
  if (auto gate = sandbox->TakeGate()) gate->Close();
  int64_t now = StableNowMs();
  sandbox->MarkCheckpointed(captured->id, reason, now,
                            sandbox->spec().persistent ? 0 : kPausedRetentionMs);
  catalogue_.MarkMetered(captured->id, now);
  // Recorded with its checkpoint before anything is torn down: a kill -9
  // from here on leaves a paused sandbox (sandbox_recover.cc). Paused to
  // callers only once torn down: a wake waits for it (SetWaker).
  Save(*sandbox);
  engine_.Destroy(sandbox->id());
  sandbox->MarkPaused();
  Save(*sandbox);
  capacity_.Release(sandbox->spec().owner, sandbox->spec().shape);
  ledger_.FlushOne(sandbox->id());
  LogInfo("sandbox paused", {{"event", "sandbox.paused"},
                             {"sandboxId", sandbox->id()},
                             {"reason", reason},
                             {"bytes", captured->size_bytes},
                             {"pauseMs", MonotonicNowMs() - t0}});
  return Status::Ok();
}

Status SandboxManager::Wake(const std::shared_ptr<Sandbox>& sandbox,
                            std::optional<int> timeout_seconds, Deadline deadline) {
  // A pause under way (a lease's end, E2B's list showing it paused) ends
  // within seconds: the wake comes after it.
  while (sandbox->state() == SandboxState::kPausing && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!sandbox->MarkResuming()) {
    SandboxState st = sandbox->state();
    if (st == SandboxState::kRunning || st == SandboxState::kResuming ||
        st == SandboxState::kStarting)
      return Status(Code::kNotPaused, "sandbox " + sandbox->id() + " is " +
                                          std::string(StateName(st)) + ", not paused");
    return sandbox->RequireRunning();
  }
  Save(*sandbox);
  const SandboxSpec& spec = sandbox->spec();
  auto fail = [&](Status why) {
    sandbox->MarkWakeFailed();
    Save(*sandbox);
    LogWarn("wake failed; the sandbox stays paused",
            {{"sandboxId", sandbox->id()}, {"error", why.ToString()}});
    return why;
  };
  {
    std::lock_guard lock(mu_);
    if (closing_)
      return fail(Status(Code::kShuttingDown, "kilnd is shutting down").WithRetryAfter(1));
  }
  switch (capacity_.Acquire(spec.owner, spec.shape, deadline)) {
    case Capacity::Result::kGranted:
      break;
    case Capacity::Result::kNeverFits:
      return fail(Status(Code::kInvalidRequest, "the sandbox's shape no longer fits this host"));
    case Capacity::Result::kQuotaExceeded:
      return fail(Status(Code::kQuotaExceeded,
                         "this key already runs its limit of " +
                             std::to_string(capacity_.limits().key_sandboxes) + " sandboxes")
                      .WithRetryAfter(capacity_.RetryAfterSeconds()));
    case Capacity::Result::kLineFull:
      return fail(Status(Code::kRateLimited,
                         "this key already has " + std::to_string(capacity_.limits().key_waiting) +
                             " creates or wakes waiting for room; the sandbox stays paused")
                      .WithRetryAfter(capacity_.RetryAfterSeconds()));
    case Capacity::Result::kNoCapacity:
      return fail(Status(Code::kNoCapacity, "the host is full; the sandbox stays paused")
                      .WithRetryAfter(capacity_.RetryAfterSeconds()));
  }
  SandboxRecord rec = sandbox->Record();
  auto checkpoint = snapshots_.Get(rec.checkpoint);
  if (!checkpoint) {
    capacity_.Release(spec.owner, spec.shape);
    return fail(Status(Code::kSnapshotCorrupted,
                       "the checkpoint of sandbox " + sandbox->id() + " is missing"));
  }
  if (Status intact = snapshots_.Verify(rec.checkpoint); !intact.ok()) {
    capacity_.Release(spec.owner, spec.shape);
    // Missing or altered: the files are kept for inspection, never restored.
    return fail(Status(Code::kSnapshotCorrupted,
                       "the checkpoint of sandbox " + sandbox->id() + " " + intact.message()));
  }
  int64_t t0 = MonotonicNowMs();
  engine::CreateParams params{sandbox->id(), spec.shape,
                              spec.rootfs.empty() ? rootfs_ : spec.rootfs, engine::kCpuWeight,
                              spec.run_as};
  // A memory checkpoint restores; a files-only one boots afresh on them.
  auto started = StartCopy(engine_, params, *checkpoint, snapshots_.CheckpointDir(rec.checkpoint),
                           /*warm=*/false);
  if (started.ok() && checkpoint->mode == store::SnapshotMode::kDisk && !spec.sudo) {
    if (Status set = engine::AgentClient(*started).Configure(false); !set.ok()) {
      engine_.Destroy(sandbox->id());
      started = Status(Code::kStartupFailed, "its sudo could not be set: " + set.message());
    }
  }
  if (!started.ok()) {
    capacity_.Release(spec.owner, spec.shape);
    return fail(
        Status(Code::kStartupFailed, "the sandbox failed to wake: " + started.status().message()));
  }
  std::shared_ptr<engine::AgentChannel> conn = std::move(*started);
  int64_t now = StableNowMs();
  // The paused interval's storage, then CPU from the new cgroup's zero.
  ledger_.Accumulate(MeterPaused(*sandbox, now));
  Meter m = sandbox->meter();
  m.cpu_ns = engine_.GetUsage(sandbox->id()).cpu_ns;
  m.at_ms = now;
  sandbox->SetMeter(m);
  int64_t lease_ms = std::min<int64_t>(
      timeout_seconds
          ? static_cast<int64_t>(*timeout_seconds) * 1000
          : std::max<int64_t>(rec.paused_lease_ms, int64_t{spec.timeout_seconds} * 1000),
      int64_t{options_.max_lease_seconds} * 1000);
  Watch(sandbox, conn);
  sandbox->MarkResumed(std::move(conn), now, lease_ms);
  // Recorded running before the checkpoint goes: a kill -9 in between
  // leaves a running sandbox (re-adopted) and an orphan checkpoint (dropped).
  Save(*sandbox);
  snapshots_.Delete(rec.checkpoint);
  catalogue_.ForgetMetered(rec.checkpoint);
  ledger_.FlushOne(sandbox->id());
  bool fresh = checkpoint->mode == store::SnapshotMode::kDisk;
  LogInfo("sandbox woken", {{"event", "sandbox.woken"},
                            {"sandboxId", sandbox->id()},
                            {"booted", fresh},
                            {"wakeMs", MonotonicNowMs() - t0}});
  if (fresh && fresh_wake_) fresh_wake_(sandbox);
  return Status::Ok();
}

void SandboxManager::PauseInBackground(std::shared_ptr<Sandbox> sandbox, std::string reason) {
  {
    std::lock_guard lock(mu_);
    ++background_stops_;
  }
  auto work = [this, sandbox, reason] {
    Status paused = Pause(sandbox, reason);
    // A sandbox whose lease ended must end: stopped when it cannot pause.
    if (!paused.ok() && reason == "lease_expired" && sandbox->running())
      Stop(sandbox, "pause_failed");
    std::lock_guard lock(mu_);
    if (--background_stops_ == 0) background_cv_.notify_all();
  };
  try {
    std::thread(work).detach();
  } catch (const std::system_error&) {
    work();  // no thread to spare: here, rather than not at all
  }
}

void SandboxManager::EnforceLifetimes(int64_t now) {
  std::vector<std::shared_ptr<Sandbox>> all;
  {
    std::lock_guard lock(mu_);
    if (closing_) return;
    for (const auto& [id, s] : sandboxes_) all.push_back(s);
  }
  for (const auto& s : all) {
    const SandboxSpec& spec = s->spec();
    SandboxState st = s->state();
    if (st == SandboxState::kRunning) {
      bool pausable = spec.pausable;
      if (s->expires_ms() <= now) {
        if (pausable && (spec.persistent || spec.pause_on_lease_end))
          PauseInBackground(s, "lease_expired");
        else
          StopInBackground(s, "lease_expired", spec.delete_on_lease_end);
      } else if (pausable && spec.idle_pause_seconds > 0 &&
                 s->IdleFor(int64_t{spec.idle_pause_seconds} * 1000, now)) {
        PauseInBackground(s, "idle");
      } else if (spec.max_total_cost_micros &&
                 s->meter().micros >= static_cast<double>(*spec.max_total_cost_micros)) {
        StopInBackground(s, "lifetime_cap");
      }
    } else if (st == SandboxState::kPaused) {
      SandboxRecord r = s->Record();
      if (r.paused_expires_ms && r.paused_expires_ms <= now)
        StopInBackground(s, "paused_expired");
      else if (spec.max_total_cost_micros &&
               r.meter.micros >= static_cast<double>(*spec.max_total_cost_micros))
        StopInBackground(s, "lifetime_cap");
    }
  }
}

}  // namespace kiln::control
