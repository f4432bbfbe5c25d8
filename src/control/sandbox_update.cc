// :update: a sandbox's settings after its create. The spec is versioned
// (Sandbox::UpdateSpec), so readers on other threads never see a half-made
// change.
#include "common/log.h"
#include "control/sandbox_manager.h"

namespace kiln::control {

Status SandboxManager::Update(const std::shared_ptr<Sandbox>& sandbox,
                              const SandboxUpdate& update) {
  SandboxState st = sandbox->state();
  if (st == SandboxState::kStopping || st == SandboxState::kStopped)
    return sandbox->RequireRunning();
  SandboxSpec next = sandbox->spec();
  if (update.name) next.name = *update.name;
  if (update.labels) next.labels = *update.labels;
  for (const auto& [k, v] : update.env) {
    if (v) {
      next.env[k] = *v;
    } else {
      next.env.erase(k);
    }
  }
  if (update.auto_wake) next.auto_wake = *update.auto_wake;
  if (update.idle_pause_seconds) next.idle_pause_seconds = *update.idle_pause_seconds;
  if (update.persistent) next.persistent = *update.persistent;
  if (update.max_total_cost_micros) next.max_total_cost_micros = *update.max_total_cost_micros;
  if (!next.pausable && (next.persistent || next.idle_pause_seconds > 0))
    return Status(Code::kInvalidRequest,
                  "body.persistent/idlePauseSeconds: the sandbox was created with pausable: false");
  if (update.persistent && !*update.persistent && sandbox->spec().persistent &&
      st != SandboxState::kRunning)
    return Status(Code::kInvalidRequest,
                  "body.persistent: cannot be turned off while the sandbox is paused; wake it "
                  "first");
  {
    // Under the table's lock, like a create, so two renames cannot both win.
    std::lock_guard lock(mu_);
    if (next.name && next.name != sandbox->spec().name) {
      for (const auto& [id, other] : sandboxes_) {
        if (other != sandbox && other->spec().owner == next.owner &&
            other->spec().name == next.name && other->state() != SandboxState::kStopped)
          return NameTaken(*next.name, id);
      }
    }
    if (!sandbox->UpdateSpec(std::move(next)))
      return Status(
          Code::kInvalidRequest,
          "a sandbox takes at most " + std::to_string(Sandbox::kMaxSpecVersions) + " updates");
  }
  Save(*sandbox);
  LogInfo("sandbox updated", {{"event", "sandbox.updated"}, {"sandboxId", sandbox->id()}});
  return Status::Ok();
}

}  // namespace kiln::control
