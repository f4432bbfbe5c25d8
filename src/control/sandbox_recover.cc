// Recovery: what a kilnd starting on an earlier one's table does with the
// sandboxes it finds. One still running is re-adopted (unless it was
// re-adopted too often after crashes), one paused stays paused, anything
// else is marked stopped; whatever the engine has that no record holds is
// removed.
#include <algorithm>
#include <set>

#include "common/log.h"
#include "common/time.h"
#include "control/sandbox_manager.h"

namespace kiln::control {

using nlohmann::json;

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

bool SandboxManager::RecoverPaused(const std::shared_ptr<Sandbox>& s) {
  SandboxRecord r = s->Record();
  // Caught pausing or resuming: if it still runs, it runs (re-adopted);
  // otherwise it is paused, if its checkpoint is whole.
  if (r.state != SandboxState::kPaused) {
    auto attached = engine_.Attach(s->id(), s->spec().shape);
    if (attached.ok()) {
      std::shared_ptr<engine::AgentChannel> conn = std::move(*attached);
      capacity_.Adopt(s->spec().owner, s->spec().shape);
      Watch(s, conn);
      s->MarkResumed(std::move(conn), StableNowMs(),
                     std::max<int64_t>(r.expires_ms - StableNowMs(), 60000));
      Save(*s);
      LogInfo("re-adopted a sandbox caught pausing or waking",
              {{"event", "sandbox.adopted"}, {"sandboxId", s->id()}});
      return true;
    }
    if (r.state == SandboxState::kResuming) {
      s->MarkWakeFailed();
    } else if (!r.checkpoint.empty()) {
      // Checkpointed, caught tearing down: paused.
      engine_.Destroy(s->id());
      s->MarkPaused();
    } else {
      // Pausing with nothing left running: the capture never got recorded.
      s->MarkStopping("host_lost");
      s->MarkStopped(StableNowMs());
      Save(*s);
      LogWarn("sandbox lost while pausing", {{"event", "sandbox.lost"}, {"sandboxId", s->id()}});
      return false;
    }
  }
  r = s->Record();
  auto checkpoint = snapshots_.Get(r.checkpoint);
  if (!checkpoint || checkpoint->paused_sandbox != s->id()) {
    s->MarkStopping("host_lost");
    s->MarkStopped(StableNowMs());
    Save(*s);
    LogWarn("paused sandbox lost its checkpoint",
            {{"event", "sandbox.lost"}, {"sandboxId", s->id()}});
    return false;
  }
  Save(*s);
  catalogue_.MarkMetered(r.checkpoint, StableNowMs());
  LogInfo("kept a paused sandbox", {{"event", "sandbox.kept_paused"}, {"sandboxId", s->id()}});
  return false;
}

void SandboxManager::DropOrphanCheckpoints() {
  for (const auto& snap : snapshots_.List()) {
    if (snap.paused_sandbox.empty()) continue;
    auto s = Get(snap.paused_sandbox);
    if (s && s->state() == SandboxState::kPaused && s->Record().checkpoint == snap.id) continue;
    LogInfo("removing a pause checkpoint no sandbox holds",
            {{"snapshotId", snap.id}, {"sandboxId", snap.paused_sandbox}});
    snapshots_.Delete(snap.id);
  }
  // A fork's own capture outlives its fork only if kilnd died mid-fork.
  for (const auto& snap : snapshots_.List())
    if (snap.temporary) snapshots_.Delete(snap.id);
}

}  // namespace kiln::control
