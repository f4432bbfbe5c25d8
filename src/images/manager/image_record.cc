#include "images/manager/image_record.h"

#include <array>
#include <utility>

#include "common/json_integer.h"

namespace kiln::images {

using nlohmann::json;

namespace {

constexpr std::array<std::pair<ImageState, std::string_view>, 6> kStateNames = {{
    {ImageState::kQueued, "queued"},
    {ImageState::kBuilding, "building"},
    {ImageState::kReady, "ready"},
    {ImageState::kFailed, "failed"},
    {ImageState::kDeleting, "deleting"},
    {ImageState::kDeleted, "deleted"},
}};

constexpr std::array<std::pair<ImageSource, std::string_view>, 4> kSourceNames = {{
    {ImageSource::kRecipe, "recipe"},
    {ImageSource::kDockerfile, "dockerfile"},
    {ImageSource::kImage, "image"},
    {ImageSource::kBuiltin, "builtin"},
}};

std::optional<std::string> StringOr(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

}  // namespace

std::string_view ImageStateName(ImageState state) {
  for (const auto& [s, name] : kStateNames)
    if (s == state) return name;
  return "failed";
}

std::optional<ImageState> ParseImageState(std::string_view name) {
  for (const auto& [s, n] : kStateNames)
    if (n == name) return s;
  return std::nullopt;
}

std::string_view SourceName(ImageSource source) {
  for (const auto& [s, name] : kSourceNames)
    if (s == source) return name;
  return "dockerfile";
}

std::optional<ImageSource> ParseImageSource(std::string_view name) {
  for (const auto& [s, n] : kSourceNames)
    if (n == name) return s;
  return std::nullopt;
}

json ConfigJson(const OciConfig& c) {
  json env = json::object();
  for (const auto& kv : c.env) {
    size_t eq = kv.find('=');
    env[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
  }
  return json{{"user", c.user},
              {"workdir", c.working_dir},
              {"env", env},
              {"cmd", c.cmd.empty() ? json(nullptr) : json(c.cmd)},
              {"entrypoint", c.entrypoint.empty() ? json(nullptr) : json(c.entrypoint)},
              {"exposedPorts", c.exposed_ports},
              {"labels", c.labels},
              {"stopSignal", c.stop_signal ? json(*c.stop_signal) : json(nullptr)}};
}

OciConfig ConfigFromJson(const json& j) {
  OciConfig c;
  c.user = j.value("user", "");
  c.working_dir = j.value("workdir", "");
  if (j.contains("env") && j["env"].is_object())
    for (const auto& [k, v] : j["env"].items()) c.env.push_back(k + "=" + v.get<std::string>());
  if (j.contains("cmd") && j["cmd"].is_array()) c.cmd = j["cmd"].get<std::vector<std::string>>();
  if (j.contains("entrypoint") && j["entrypoint"].is_array())
    c.entrypoint = j["entrypoint"].get<std::vector<std::string>>();
  c.exposed_ports = j.value("exposedPorts", std::vector<std::string>{});
  c.labels = j.value("labels", std::map<std::string, std::string>{});
  if (j.contains("stopSignal") && j["stopSignal"].is_string()) c.stop_signal = j["stopSignal"];
  return c;
}

json StartJson(const StartSpec& s) {
  json j{{"cwd", s.cwd ? json(*s.cwd) : json(nullptr)},
         {"env", s.env},
         {"readyTimeoutSeconds", s.ready_timeout_seconds}};
  if (s.argv) j["argv"] = *s.argv;
  if (s.command) j["command"] = *s.command;
  if (s.ready_command) j["readyCommand"] = *s.ready_command;
  if (s.ready_port) j["readyPort"] = *s.ready_port;
  return j;
}

StartSpec StartFromJson(const json& j) {
  StartSpec s;
  if (j.contains("argv")) s.argv = j["argv"].get<std::vector<std::string>>();
  if (j.contains("command")) s.command = j["command"].get<std::string>();
  if (j.contains("cwd") && j["cwd"].is_string()) s.cwd = j["cwd"].get<std::string>();
  s.env = j.value("env", std::map<std::string, std::string>{});
  if (j.contains("readyCommand")) s.ready_command = j["readyCommand"].get<std::string>();
  if (j.contains("readyPort")) s.ready_port = j["readyPort"].get<int>();
  s.ready_timeout_seconds = j.value("readyTimeoutSeconds", 60);
  return s;
}

json BuildJson(const BuildLimits& b) {
  return json{{"vcpu", b.vcpu},
              {"memoryMiB", b.memory_mib},
              {"diskMiB", b.disk_mib},
              {"maxImageMiB", b.max_image_mib},
              {"timeoutSeconds", b.timeout_seconds}};
}

BuildLimits BuildFromJson(const json& j) {
  BuildLimits b;
  b.vcpu = JsonIntegerOr<int>(j, "vcpu", b.vcpu);
  b.memory_mib = JsonIntegerOr<int>(j, "memoryMiB", b.memory_mib);
  b.disk_mib = JsonIntegerOr<int>(j, "diskMiB", b.disk_mib);
  b.max_image_mib = JsonIntegerOr<int>(j, "maxImageMiB", b.max_image_mib);
  b.timeout_seconds = JsonIntegerOr<int>(j, "timeoutSeconds", b.timeout_seconds);
  return b;
}

void to_json(json& j, const ImageRecord& r) {
  j = json{{"id", r.id},
           {"kind", "image"},
           {"owner", r.owner},
           {"name", r.name},
           {"version", r.version},
           {"tags", r.tags},
           {"state", ImageStateName(r.state)},
           {"source", SourceName(r.source)},
           {"ref", r.ref ? json(*r.ref) : json(nullptr)},
           {"start", r.start ? StartJson(*r.start) : json(nullptr)},
           {"build", r.build ? BuildJson(*r.build) : json(nullptr)},
           {"labels", r.labels},
           {"sudo", r.sudo},
           {"digest", r.digest ? json(*r.digest) : json(nullptr)},
           {"config", r.config ? ConfigJson(*r.config) : json(nullptr)},
           {"sizeBytes", r.size_bytes},
           {"stepsTotal", r.steps_total},
           {"stepsCached", r.steps_cached},
           {"error", r.error},
           {"createdMs", r.created_ms}};
  if (!r.pending_tags.empty()) j["pendingTags"] = r.pending_tags;
  if (!r.step_names.empty()) j["stepNames"] = r.step_names;
  if (r.shape)
    j["shape"] = {{"vcpu", r.shape->vcpu},
                  {"memoryMiB", r.shape->memory_mib},
                  {"diskMiB", r.shape->disk_mib}};
  if (!r.chain_id.empty()) {
    json layers = json::array();
    for (const auto& l : r.layers) layers.push_back(l.str());
    j["layers"] = layers;
    j["chainId"] = r.chain_id;
  }
  if (r.run_as) j["runAs"] = *r.run_as;
  if (r.steps_run) j["stepsRun"] = *r.steps_run;
  if (r.warm_snapshot) j["warmSnapshot"] = *r.warm_snapshot;
  if (!r.warm.is_null()) j["warm"] = r.warm;
  if (r.started_ms) j["startedMs"] = r.started_ms;
  if (r.ready_ms) j["readyMs"] = r.ready_ms;
  if (r.ended_ms) j["endedMs"] = r.ended_ms;
}

void from_json(const json& j, ImageRecord& r) {
  r = ImageRecord{};
  j.at("id").get_to(r.id);
  r.owner = StringOr(j, "owner").value_or("");
  r.name = StringOr(j, "name").value_or("");
  r.version = JsonIntegerOr<int64_t>(j, "version", 0);
  if (auto t = j.find("tags"); t != j.end() && t->is_array()) t->get_to(r.tags);
  r.state = ParseImageState(StringOr(j, "state").value_or("")).value_or(ImageState::kFailed);
  r.source =
      ParseImageSource(StringOr(j, "source").value_or("")).value_or(ImageSource::kDockerfile);
  r.ref = StringOr(j, "ref");
  if (auto s = j.find("start"); s != j.end() && s->is_object()) r.start = StartFromJson(*s);
  if (auto b = j.find("build"); b != j.end() && b->is_object()) r.build = BuildFromJson(*b);
  if (auto l = j.find("labels"); l != j.end() && l->is_object()) l->get_to(r.labels);
  r.sudo = j.value("sudo", true);
  if (auto p = j.find("pendingTags"); p != j.end() && p->is_array()) p->get_to(r.pending_tags);
  if (auto p = j.find("stepNames"); p != j.end() && p->is_array()) p->get_to(r.step_names);
  if (auto p = j.find("shape"); p != j.end() && p->is_object()) {
    Shape shape;
    shape.vcpu = p->value("vcpu", shape.vcpu);
    shape.memory_mib = p->value("memoryMiB", shape.memory_mib);
    shape.disk_mib = p->value("diskMiB", shape.disk_mib);
    r.shape = shape;
  }
  if (auto l = j.find("layers"); l != j.end() && l->is_array()) {
    for (const auto& v : *l) {
      std::optional<LayerId> id =
          v.is_string() ? LayerId::Parse(v.get<std::string>()) : std::nullopt;
      if (!id)
        throw json::type_error::create(302, "layers: " + v.dump() + " is not a layer id", &v);
      r.layers.push_back(*id);
    }
  }
  r.chain_id = StringOr(j, "chainId").value_or("");
  r.digest = StringOr(j, "digest");
  if (auto c = j.find("config"); c != j.end() && c->is_object()) r.config = ConfigFromJson(*c);
  if (auto u = j.find("runAs"); u != j.end() && u->is_object()) r.run_as = u->get<RunAs>();
  r.size_bytes = JsonIntegerOr<uint64_t>(j, "sizeBytes", 0);
  r.steps_total = JsonIntegerOr<int>(j, "stepsTotal", 0);
  r.steps_cached = JsonIntegerOr<int>(j, "stepsCached", 0);
  if (auto s = j.find("stepsRun"); s != j.end() && !s->is_null())
    r.steps_run = JsonInteger<int>(*s, "stepsRun");
  r.error = j.value("error", json());
  r.warm_snapshot = StringOr(j, "warmSnapshot");
  r.warm = j.value("warm", json());
  r.created_ms = JsonIntegerOr<int64_t>(j, "createdMs", 0);
  r.started_ms = JsonIntegerOr<int64_t>(j, "startedMs", 0);
  r.ready_ms = JsonIntegerOr<int64_t>(j, "readyMs", 0);
  r.ended_ms = JsonIntegerOr<int64_t>(j, "endedMs", 0);
}

}  // namespace kiln::images
