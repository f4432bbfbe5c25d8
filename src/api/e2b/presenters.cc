// How kiln's sandboxes, images and snapshots look in E2B's answers (the
// keys its SDKs' from_dict methods read), and the refusals naming E2B's
// features kiln lacks.
#include <array>

#include "api/e2b/e2b.h"
#include "api/e2b/routes.h"
#include "common/time.h"

namespace kiln::api::e2b {

using nlohmann::json;

namespace presented {
namespace {

// E2B's clientID is a legacy field its SDKs still require.
constexpr const char* kClientId = "kiln";

json Common(const control::SandboxRecord& r, const SandboxExtras& x) {
  const control::SandboxSpec& spec = r.spec;
  // A paused sandbox's lease clock is stopped: it ends what it had left
  // after it is resumed.
  int64_t end =
      r.state == control::SandboxState::kPaused ? x.now_ms + r.paused_lease_ms : r.expires_ms;
  json j{{"templateID", x.template_id},
         {"sandboxID", r.id},
         {"clientID", kClientId},
         {"startedAt", FormatTime(r.created_ms)},
         {"endAt", FormatTime(end)},
         {"cpuCount", spec.shape.vcpu},
         {"memoryMB", spec.shape.memory_mib},
         {"diskSizeMB", spec.shape.disk_mib},
         {"state", E2bStateName(r.state).value_or("paused")},
         {"envdVersion", kEnvdVersion},
         {"metadata", spec.labels}};
  if (spec.name) j["alias"] = *spec.name;
  return j;
}

struct Feature {
  const char* segment;
  const char* name;
  const char* why;
};

// The first segment of a refused path that names an E2B feature.
constexpr std::array<Feature, 9> kE2bFeatures{{
    {"logs", "logs apart from a build's status",
     "kiln keeps no sandbox log (read a process's output via envd or /v1); a template "
     "build's log comes with its status (logEntries)"},
    {"network", "reading a sandbox's network rules",
     "read them with GET /v1/sandboxes/{id}/network; PUT .../network sets them here"},
    {"volumes", "volumes", "kiln has no volumes; keep data in a snapshot or an image"},
    {"secrets", "secrets", "kiln stores no secrets; pass envVars at create"},
    {"tags", "tag groups and counts",
     "list a template's tags with GET /templates/{id}/tags; assign and remove them with "
     "POST and DELETE /templates/tags"},
    {"builds", "template build listings",
     "a build's status is GET /templates/{id}/builds/{buildID}/status"},
    {"default-templates", "default templates", "kiln's built-in image is `base`"},
    {"teams", "teams", "kiln has no teams; a key is the identity"},
    {"access-tokens", "access tokens", "kiln keys are managed with `kiln keys` or /v1/keys"},
}};

}  // namespace
}  // namespace presented

std::optional<std::string> E2bStateName(control::SandboxState state) {
  switch (state) {
    case control::SandboxState::kStarting:
    case control::SandboxState::kRunning:
      return "running";
    case control::SandboxState::kPausing:
    case control::SandboxState::kPaused:
    case control::SandboxState::kResuming:
      return "paused";
    case control::SandboxState::kStopping:
    case control::SandboxState::kStopped:
      return std::nullopt;
  }
  return std::nullopt;
}

json CreatedJson(const control::SandboxRecord& r, const SandboxExtras& x) {
  // No domain: the SDKs then reach the sandbox through E2B_SANDBOX_URL.
  return json{{"templateID", x.template_id},
              {"sandboxID", r.id},
              {"clientID", presented::kClientId},
              {"envdVersion", kEnvdVersion},
              {"envdAccessToken", x.envd_access_token},
              {"trafficAccessToken", x.traffic_access_token},
              {"domain", nullptr}};
}

json ListedJson(const control::SandboxRecord& r, const SandboxExtras& x) {
  return presented::Common(r, x);
}

json SandboxMetricJson(const control::MetricSample& m) {
  return {{"timestamp", FormatTime(m.at_ms)}, {"timestampUnix", m.at_ms / 1000},
          {"cpuCount", m.cpu_cores},          {"cpuUsedPct", m.cpu_percent},
          {"memUsed", m.memory_bytes},        {"memTotal", m.memory_limit_bytes},
          {"memCache", m.memory_cache_bytes}, {"diskUsed", m.disk_bytes},
          {"diskTotal", m.disk_limit_bytes}};
}

json DetailJson(const control::SandboxRecord& r, const SandboxExtras& x) {
  json j = presented::Common(r, x);
  j["envdAccessToken"] = x.envd_access_token;
  j["domain"] = nullptr;
  // kiln's rules in E2B's terms (see ReadCreate): internet off, or an
  // allow list, is everything denied but allowOut.
  bool open = r.network.internet && r.network.allow.empty();
  j["allowInternetAccess"] = open;
  json net = json::object();
  if (!r.network.allow.empty()) net["allowOut"] = r.network.allow;
  json deny = r.network.deny;
  if (!open) deny.push_back("0.0.0.0/0");
  if (!deny.empty()) net["denyOut"] = deny;
  j["network"] = net;
  j["lifecycle"] = {
      {"autoResume", r.spec.auto_wake},
      {"onTimeout", r.spec.pause_on_lease_end || r.spec.persistent ? "pause" : "kill"}};
  return j;
}

json TemplateJson(const images::ImageRecord& image) {
  bool builtin = image.source == images::ImageSource::kBuiltin;
  std::string at = FormatTime(image.created_ms);
  Shape shape = image.shape.value_or(Shape{});
  return json{{"templateID", image.name},
              {"buildID", image.id},
              {"cpuCount", shape.vcpu},
              {"memoryMB", shape.memory_mib},
              {"diskSizeMB", image.size_bytes / (1024 * 1024)},
              {"public", builtin},
              {"aliases", json::array({image.name})},
              {"names", json::array({image.name})},
              {"createdAt", at},
              {"updatedAt", at},
              {"createdBy", nullptr},
              {"lastSpawnedAt", nullptr},
              {"spawnCount", 0},
              {"buildCount", 1},
              {"envdVersion", kEnvdVersion},
              {"buildStatus", "ready"}};
}

json SnapshotInfoJson(const store::SnapshotRecord& r) {
  json names = json::array();
  if (r.name) names.push_back(*r.name);
  return json{{"snapshotID", r.id}, {"names", names}};
}

Status Unsupported(const std::string& method, const std::string& path) {
  std::string rest = path.starts_with(kPrefix) ? path.substr(std::string(kPrefix).size()) : path;
  // Templates are written by builds (POST /v3/templates and what follows
  // it), tags and deletes; the older build protocol and updates are not.
  if (method != "GET" && (rest.starts_with("/templates") || rest.starts_with("/v2/templates") ||
                          rest.starts_with("/v3/templates")))
    return Status(Code::kNotSupported,
                  "template updates (" + method + " " + path +
                      ") are not offered by kiln's E2B front: a template changes by a build "
                      "(POST /v3/templates, the e2b SDK's Template.build), its tags or a delete",
                  json{{"feature", "template updates"}});
  for (size_t start = 1; start < rest.size();) {
    size_t end = rest.find('/', start);
    std::string seg = rest.substr(start, end == std::string::npos ? end : end - start);
    for (const auto& f : presented::kE2bFeatures) {
      if (seg == f.segment)
        return Status(Code::kNotSupported,
                      std::string(f.name) + " (" + method + " " + path +
                          ") is not offered by kiln's E2B front: " + f.why,
                      json{{"feature", f.name}});
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return Status(Code::kRouteNotFound, method + " " + path +
                                          " is not an E2B route kiln serves (see docs/api.md, "
                                          "\"E2B's SDKs\")");
}

}  // namespace kiln::api::e2b
