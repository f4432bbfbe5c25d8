#include "control/sandbox.h"

#include "common/time.h"

namespace kiln::control {

using nlohmann::json;

Sandbox::Sandbox(std::string id, SandboxSpec spec, int64_t created_ms)
    : id_(std::move(id)),
      spec_(std::move(spec)),
      created_ms_(created_ms),
      expires_ms_(created_ms + static_cast<int64_t>(spec_.timeout_seconds) * 1000) {}

std::string Sandbox::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

int64_t Sandbox::expires_ms() const {
  std::lock_guard lock(mu_);
  return expires_ms_;
}

std::shared_ptr<engine::AgentConnection> Sandbox::conn() const {
  std::lock_guard lock(mu_);
  return state_ == "running" ? conn_ : nullptr;
}

void Sandbox::MarkRunning(std::shared_ptr<engine::AgentConnection> conn, int64_t now_ms) {
  std::lock_guard lock(mu_);
  if (state_ != "starting") return;
  conn_ = std::move(conn);
  state_ = "running";
  ready_ms_ = now_ms;
}

bool Sandbox::MarkStopping(const std::string& reason) {
  std::lock_guard lock(mu_);
  if (state_ == "stopping" || state_ == "stopped") return false;
  state_ = "stopping";
  stop_reason_ = reason;
  return true;
}

void Sandbox::MarkStopped(int64_t now_ms) {
  std::shared_ptr<engine::AgentConnection> conn;
  {
    std::lock_guard lock(mu_);
    state_ = "stopped";
    ended_ms_ = now_ms;
    conn = std::move(conn_);
  }
  if (conn) conn->Close();
}

json Sandbox::Info() const {
  std::lock_guard lock(mu_);
  json env_names = json::array();
  for (const auto& [k, v] : spec_.env) env_names.push_back(k);
  auto time_or_null = [](int64_t ms) { return ms ? json(FormatTime(ms)) : json(nullptr); };
  return json{{"id", id_},
              {"kind", "sandbox"},
              {"name", spec_.name ? json(*spec_.name) : json(nullptr)},
              {"labels", spec_.labels},
              {"state", state_},
              {"vcpu", spec_.shape.vcpu},
              {"memoryMiB", spec_.shape.memory_mib},
              {"diskMiB", spec_.shape.disk_mib},
              {"timeoutSeconds", spec_.timeout_seconds},
              {"createdAt", FormatTime(created_ms_)},
              {"readyAt", time_or_null(ready_ms_)},
              {"expiresAt", FormatTime(expires_ms_)},
              {"endedAt", time_or_null(ended_ms_)},
              {"stopReason", stop_reason_.empty() ? json(nullptr) : json(stop_reason_)},
              {"envNames", env_names}};
}

}  // namespace kiln::control
