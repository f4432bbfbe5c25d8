#include "control/sandbox.h"

#include <algorithm>

#include "common/time.h"

namespace kiln::control {

using nlohmann::json;

Sandbox::Sandbox(std::string id, SandboxSpec spec, int64_t created_ms)
    : id_(std::move(id)),
      spec_(std::move(spec)),
      created_ms_(created_ms),
      expires_ms_(created_ms + static_cast<int64_t>(spec_.timeout_seconds) * 1000),
      network_(spec_.network.value_or(network::Policy{})),
      network_updated_ms_(created_ms) {}

network::Policy Sandbox::network() const {
  std::lock_guard lock(mu_);
  return network_;
}

int64_t Sandbox::SetNetwork(const network::Policy& policy, int64_t now_ms) {
  std::shared_ptr<egress::Gate> gate;
  int64_t version;
  {
    std::lock_guard lock(mu_);
    network_ = policy;
    version = ++network_version_;
    network_updated_ms_ = now_ms;
    gate = gate_;
  }
  if (gate) gate->SetPolicy(policy);
  return version;
}

json Sandbox::NetworkInfo() const {
  std::lock_guard lock(mu_);
  json j = network_.ToJson();
  j["sandboxId"] = id_;
  j["version"] = network_version_;
  // Rules are applied before PUT answers, so what is enforced is what is set.
  j["enforced"] = true;
  j["enforcedVersion"] = network_version_;
  j["updatedAt"] = FormatTime(network_updated_ms_);
  return j;
}

void Sandbox::SetGate(std::shared_ptr<egress::Gate> gate) {
  std::lock_guard lock(mu_);
  gate_ = std::move(gate);
  if (gate_) gate_->SetPolicy(network_);
}

std::shared_ptr<egress::Gate> Sandbox::TakeGate() {
  std::lock_guard lock(mu_);
  return std::move(gate_);
}

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
  if (state_ != "starting" && state_ != "running") return;
  conn_ = std::move(conn);
  state_ = "running";
  if (!ready_ms_) ready_ms_ = now_ms;
}

int64_t Sandbox::Extend(int64_t seconds, int64_t now_ms, int64_t cap_ms) {
  std::lock_guard lock(mu_);
  expires_ms_ = std::min(std::max(expires_ms_, now_ms) + seconds * 1000, now_ms + cap_ms);
  return expires_ms_;
}

Sandbox::Meter Sandbox::meter() const {
  std::lock_guard lock(mu_);
  return meter_;
}

void Sandbox::SetMeter(const Meter& m) {
  std::lock_guard lock(mu_);
  meter_ = m;
}

int64_t Sandbox::ended_ms() const {
  std::lock_guard lock(mu_);
  return ended_ms_;
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
  return json{
      {"id", id_},
      {"kind", "sandbox"},
      {"name", spec_.name ? json(*spec_.name) : json(nullptr)},
      {"labels", spec_.labels},
      {"state", state_},
      {"vcpu", spec_.shape.vcpu},
      {"memoryMiB", spec_.shape.memory_mib},
      {"diskMiB", spec_.shape.disk_mib},
      {"timeoutSeconds", spec_.timeout_seconds},
      {"onLeaseEnd", "stop"},
      {"maxCostMicros", spec_.max_cost_micros ? json(*spec_.max_cost_micros) : json(nullptr)},
      {"chargedMicros", static_cast<int64_t>(meter_.micros)},
      {"cpuSeconds", meter_.cpu_seconds},
      {"createdAt", FormatTime(created_ms_)},
      {"readyAt", time_or_null(ready_ms_)},
      {"expiresAt", FormatTime(expires_ms_)},
      {"endedAt", time_or_null(ended_ms_)},
      {"stopReason", stop_reason_.empty() ? json(nullptr) : json(stop_reason_)},
      {"envNames", env_names},
      {"network", network_.ToJson()}};
}

json Sandbox::Record() const {
  std::lock_guard lock(mu_);
  json j{{"id", id_},
         {"owner", spec_.owner},
         {"vcpu", spec_.shape.vcpu},
         {"memoryMiB", spec_.shape.memory_mib},
         {"diskMiB", spec_.shape.disk_mib},
         {"timeoutSeconds", spec_.timeout_seconds},
         {"labels", spec_.labels},
         {"env", spec_.env},
         {"state", state_},
         {"createdMs", created_ms_},
         {"readyMs", ready_ms_},
         {"expiresMs", expires_ms_},
         {"endedMs", ended_ms_},
         {"stopReason", stop_reason_},
         {"network", network_.ToJson()},
         {"networkVersion", network_version_},
         {"networkUpdatedMs", network_updated_ms_},
         {"meter",
          {{"cpuNs", meter_.cpu_ns},
           {"atMs", meter_.at_ms},
           {"cpuSeconds", meter_.cpu_seconds},
           {"gibHours", meter_.gib_hours},
           {"micros", meter_.micros}}}};
  if (spec_.name) j["name"] = *spec_.name;
  if (spec_.snapshot) j["snapshot"] = *spec_.snapshot;
  if (spec_.max_cost_micros) j["maxCostMicros"] = *spec_.max_cost_micros;
  return j;
}

std::shared_ptr<Sandbox> Sandbox::FromRecord(const json& r) {
  SandboxSpec spec;
  spec.owner = r.value("owner", "");
  spec.shape.vcpu = r.value("vcpu", 1);
  spec.shape.memory_mib = r.value("memoryMiB", 512);
  spec.shape.disk_mib = r.value("diskMiB", spec.shape.disk_mib);
  spec.timeout_seconds = r.value("timeoutSeconds", 1800);
  spec.labels = r.value("labels", std::map<std::string, std::string>{});
  spec.env = r.value("env", std::map<std::string, std::string>{});
  if (r.contains("name")) spec.name = r["name"].get<std::string>();
  if (r.contains("snapshot")) spec.snapshot = r["snapshot"].get<std::string>();
  if (r.contains("maxCostMicros")) spec.max_cost_micros = r["maxCostMicros"].get<int64_t>();
  if (r.contains("network")) {
    // Written by us, so valid; a record from before egress rules is "off".
    network::PolicyError error;
    spec.network = network::ParsePolicy(r["network"], "network", &error);
  }
  auto s = std::make_shared<Sandbox>(r.at("id").get<std::string>(), std::move(spec),
                                     r.value("createdMs", int64_t{0}));
  s->state_ = r.value("state", "stopped");
  s->ready_ms_ = r.value("readyMs", int64_t{0});
  s->expires_ms_ = r.value("expiresMs", s->expires_ms_);
  s->ended_ms_ = r.value("endedMs", int64_t{0});
  s->stop_reason_ = r.value("stopReason", "");
  s->network_version_ = r.value("networkVersion", int64_t{1});
  s->network_updated_ms_ = r.value("networkUpdatedMs", s->created_ms_);
  const json& m = r.value("meter", json::object());
  s->meter_.cpu_ns = m.value("cpuNs", uint64_t{0});
  s->meter_.at_ms = m.value("atMs", int64_t{0});
  s->meter_.cpu_seconds = m.value("cpuSeconds", 0.0);
  s->meter_.gib_hours = m.value("gibHours", 0.0);
  s->meter_.micros = m.value("micros", 0.0);
  return s;
}

int64_t Sandbox::ready_ms() const {
  std::lock_guard lock(mu_);
  return ready_ms_;
}

}  // namespace kiln::control
