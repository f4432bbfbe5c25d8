#include "control/sandbox_record.h"

#include "common/json_integer.h"

#include <array>

namespace kiln::control {

using nlohmann::json;

namespace {
constexpr std::array<std::pair<SandboxState, std::string_view>, 7> kStateNames = {{
    {SandboxState::kStarting, "starting"},
    {SandboxState::kRunning, "running"},
    {SandboxState::kStopping, "stopping"},
    {SandboxState::kStopped, "stopped"},
    {SandboxState::kPausing, "pausing"},
    {SandboxState::kPaused, "paused"},
    {SandboxState::kResuming, "resuming"},
}};
}  // namespace

std::string_view StateName(SandboxState state) {
  for (const auto& [s, name] : kStateNames)
    if (s == state) return name;
  return "stopped";
}

std::optional<SandboxState> ParseState(std::string_view name) {
  for (const auto& [s, n] : kStateNames)
    if (n == name) return s;
  return std::nullopt;
}

void to_json(json& j, const SandboxRecord& r) {
  const SandboxSpec& spec = r.spec;
  j = json{{"id", r.id},
           {"owner", spec.owner},
           {"vcpu", spec.shape.vcpu},
           {"memoryMiB", spec.shape.memory_mib},
           {"diskMiB", spec.shape.disk_mib},
           {"timeoutSeconds", spec.timeout_seconds},
           {"labels", spec.labels},
           {"env", spec.env},
           {"state", StateName(r.state)},
           {"createdMs", r.created_ms},
           {"readyMs", r.ready_ms},
           {"expiresMs", r.expires_ms},
           {"endedMs", r.ended_ms},
           {"stopReason", r.stop_reason},
           {"network", r.network.ToJson()},
           {"networkVersion", r.network_version},
           {"networkUpdatedMs", r.network_updated_ms},
           {"meter",
            {{"cpuNs", r.meter.cpu_ns},
             {"atMs", r.meter.at_ms},
             {"cpuSeconds", r.meter.cpu_seconds},
             {"gibHours", r.meter.gib_hours},
             {"micros", r.meter.micros}}}};
  if (spec.name) j["name"] = *spec.name;
  if (spec.snapshot) j["snapshot"] = *spec.snapshot;
  if (spec.image) j["image"] = *spec.image;
  if (!spec.rootfs.empty()) j["rootfs"] = spec.rootfs;
  if (spec.run_as != RunAs{}) j["runAs"] = spec.run_as;
  if (spec.max_cost_micros) j["maxCostMicros"] = *spec.max_cost_micros;
  j["pausable"] = spec.pausable;
  j["idlePauseSeconds"] = spec.idle_pause_seconds;
  j["autoWake"] = spec.auto_wake;
  j["onLeaseEnd"] = spec.pause_on_lease_end    ? "pause"
                    : spec.delete_on_lease_end ? "delete"
                                               : "stop";
  j["persistent"] = spec.persistent;
  j["pauseMemory"] = spec.pause_memory;
  if (spec.max_total_cost_micros) j["maxTotalCostMicros"] = *spec.max_total_cost_micros;
  j["sudo"] = spec.sudo;
  j["pausedMs"] = r.paused_ms;
  j["pausedLeaseMs"] = r.paused_lease_ms;
  j["checkpoint"] = r.checkpoint;
  j["pausedExpiresMs"] = r.paused_expires_ms;
  if (!r.crash_adoptions_ms.empty()) j["crashAdoptionsMs"] = r.crash_adoptions_ms;
}

void from_json(const json& j, SandboxRecord& r) {
  r = SandboxRecord{};
  j.at("id").get_to(r.id);
  SandboxSpec& spec = r.spec;
  spec.owner = j.value("owner", "");
  spec.shape.vcpu = JsonIntegerOr<decltype(spec.shape.vcpu)>(j, "vcpu", 1);
  spec.shape.memory_mib = JsonIntegerOr<decltype(spec.shape.memory_mib)>(j, "memoryMiB", 512);
  spec.shape.disk_mib =
      JsonIntegerOr<decltype(spec.shape.disk_mib)>(j, "diskMiB", spec.shape.disk_mib);
  spec.timeout_seconds = JsonIntegerOr<decltype(spec.timeout_seconds)>(j, "timeoutSeconds", 1800);
  spec.labels = j.value("labels", std::map<std::string, std::string>{});
  spec.env = j.value("env", std::map<std::string, std::string>{});
  if (j.contains("name")) spec.name = j["name"].get<std::string>();
  if (j.contains("snapshot")) spec.snapshot = j["snapshot"].get<std::string>();
  if (j.contains("image")) spec.image = j["image"].get<std::string>();
  spec.rootfs = j.value("rootfs", "");
  if (j.contains("runAs")) spec.run_as = j["runAs"].get<RunAs>();
  if (j.contains("maxCostMicros"))
    spec.max_cost_micros = JsonIntegerAt<int64_t>(j, "maxCostMicros");
  spec.pausable = j.value("pausable", true);
  spec.idle_pause_seconds =
      JsonIntegerOr<decltype(spec.idle_pause_seconds)>(j, "idlePauseSeconds", 0);
  spec.auto_wake = j.value("autoWake", true);
  spec.pause_on_lease_end = j.value("onLeaseEnd", "stop") == "pause";
  spec.delete_on_lease_end = j.value("onLeaseEnd", "stop") == "delete";
  spec.persistent = j.value("persistent", false);
  spec.pause_memory = j.value("pauseMemory", true);
  if (j.contains("maxTotalCostMicros"))
    spec.max_total_cost_micros = JsonIntegerAt<int64_t>(j, "maxTotalCostMicros");
  spec.sudo = j.value("sudo", true);
  if (j.contains("network")) {
    // Written by us, so valid; a record from before egress rules is "off".
    network::PolicyError error;
    spec.network = network::ParsePolicy(j["network"], "network", &error);
  }
  r.network = spec.network.value_or(network::Policy{});
  r.state = ParseState(j.value("state", "stopped")).value_or(SandboxState::kStopped);
  r.created_ms = JsonIntegerOr<decltype(r.created_ms)>(j, "createdMs", int64_t{0});
  r.ready_ms = JsonIntegerOr<decltype(r.ready_ms)>(j, "readyMs", int64_t{0});
  r.expires_ms = JsonIntegerOr<decltype(r.expires_ms)>(
      j, "expiresMs", r.created_ms + static_cast<int64_t>(spec.timeout_seconds) * 1000);
  r.ended_ms = JsonIntegerOr<decltype(r.ended_ms)>(j, "endedMs", int64_t{0});
  r.stop_reason = j.value("stopReason", "");
  r.network_version = JsonIntegerOr<decltype(r.network_version)>(j, "networkVersion", int64_t{1});
  r.network_updated_ms =
      JsonIntegerOr<decltype(r.network_updated_ms)>(j, "networkUpdatedMs", r.created_ms);
  const json& m = j.value("meter", json::object());
  r.meter.cpu_ns = JsonIntegerOr<decltype(r.meter.cpu_ns)>(m, "cpuNs", uint64_t{0});
  r.meter.at_ms = JsonIntegerOr<decltype(r.meter.at_ms)>(m, "atMs", int64_t{0});
  r.meter.cpu_seconds = m.value("cpuSeconds", 0.0);
  r.meter.gib_hours = m.value("gibHours", 0.0);
  r.meter.micros = m.value("micros", 0.0);
  r.paused_ms = JsonIntegerOr<decltype(r.paused_ms)>(j, "pausedMs", int64_t{0});
  r.paused_lease_ms = JsonIntegerOr<decltype(r.paused_lease_ms)>(j, "pausedLeaseMs", int64_t{0});
  r.checkpoint = j.value("checkpoint", "");
  r.paused_expires_ms =
      JsonIntegerOr<decltype(r.paused_expires_ms)>(j, "pausedExpiresMs", int64_t{0});
  if (auto c = j.find("crashAdoptionsMs"); c != j.end() && c->is_array() && c->size() <= 16) {
    for (const auto& t : *c)
      if (t.is_number_integer()) r.crash_adoptions_ms.push_back(t.get<int64_t>());
  }
}

}  // namespace kiln::control
