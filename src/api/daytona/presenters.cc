// kiln's sandboxes and files in Daytona's shapes. The SDK's models are
// strict: every field it requires is here, integers as integers, and the
// state in its own words (daytona.h).
#include <cmath>

#include "api/daytona/daytona.h"
#include "common/time.h"

namespace kiln::api::daytona {

using nlohmann::json;

namespace {

// Daytona's sizes are whole units (GiB, CPUs): kiln's, rounded up.
int64_t WholeUnits(double value, double per_unit) {
  return static_cast<int64_t>(std::ceil(value / per_unit - 1e-9));
}

bool IsAddress(const std::string& entry) {
  return !entry.empty() && (std::isdigit(static_cast<unsigned char>(entry[0])) ||
                            entry.find(':') != std::string::npos);
}

// The owner's rwx letters of a mode ("644" -> "-rw-r--r--").
std::string Permissions(const io::FileEntry& e) {
  std::string out(1, e.type == io::FileType::kDirectory ? 'd'
                     : e.type == io::FileType::kSymlink ? 'l'
                                                        : '-');
  unsigned mode = 0;
  for (char c : e.mode)
    if (c >= '0' && c <= '7') mode = mode * 8 + static_cast<unsigned>(c - '0');
  const char* letters = "rwx";
  for (int shift = 6; shift >= 0; shift -= 3)
    for (int bit = 0; bit < 3; ++bit) out += (mode >> (shift + 2 - bit)) & 1 ? letters[bit] : '-';
  return out;
}

}  // namespace

std::string DaytonaState(control::SandboxState state) {
  using control::SandboxState;
  switch (state) {
    case SandboxState::kStarting:
    case SandboxState::kResuming:
      return "starting";
    case SandboxState::kRunning:
      return "started";
    // Daytona's stop keeps the sandbox to start again: kiln's pause.
    case SandboxState::kPausing:
      return "stopping";
    case SandboxState::kPaused:
      return "stopped";
    case SandboxState::kStopping:
      return "destroying";
    case SandboxState::kStopped:
      return "destroyed";
  }
  return "unknown";
}

json SandboxJson(const control::SandboxRecord& r, const std::string& snapshot,
                 const std::string& toolbox_url) {
  const control::SandboxSpec& spec = r.spec;
  std::string cidrs, domains;
  for (const auto& entry : r.network.allow) {
    std::string& list = IsAddress(entry) ? cidrs : domains;
    list += (list.empty() ? "" : ",") + entry;
  }
  bool block_all = !r.network.internet;
  json out{
      {"id", r.id},
      {"organizationId", spec.owner},
      {"name", spec.name.value_or(r.id)},
      {"snapshot", snapshot},
      {"user", spec.run_as.user},
      {"env", spec.env},
      {"labels", spec.labels},
      {"public", false},
      {"networkBlockAll", block_all},
      {"kvm", false},
      {"target", "kiln"},
      {"cpu", WholeUnits(spec.shape.vcpu, 1)},
      {"gpu", 0},
      {"memory", WholeUnits(spec.shape.memory_mib, 1024)},
      {"disk", WholeUnits(spec.shape.disk_mib, 1024)},
      {"state", DaytonaState(r.state)},
      {"autoStopInterval", spec.idle_pause_seconds / 60},
      {"autoDeleteInterval", spec.delete_on_lease_end ? 0 : -1},
      {"autoDestroyAt", FormatTime(r.expires_ms)},
      {"createdAt", FormatTime(r.created_ms)},
      {"updatedAt", FormatTime(r.network_updated_ms > 0 ? r.network_updated_ms : r.created_ms)},
      {"volumes", json::array()},
      {"toolboxProxyUrl", toolbox_url}};
  if (!cidrs.empty()) out["networkAllowList"] = cidrs;
  if (!domains.empty()) out["domainAllowList"] = domains;
  if (!r.stop_reason.empty() && r.state == control::SandboxState::kStopped)
    out["errorReason"] = r.stop_reason;
  return out;
}

json FileInfoJson(const io::FileEntry& e) {
  return json{{"name", e.name},
              {"path", e.path},
              {"isDir", e.type == io::FileType::kDirectory},
              {"size", e.size},
              {"mode", e.mode},
              {"permissions", Permissions(e)},
              {"modTime", FormatTime(e.modified_ms)},
              {"modifiedAt", FormatTime(e.modified_ms)},
              {"owner", std::to_string(e.uid)},
              {"group", std::to_string(e.gid)}};
}

}  // namespace kiln::api::daytona
