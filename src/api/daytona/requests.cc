// Daytona's request bodies read into kiln's requests with FieldReader: a
// bad field is named ("body.cpu: ..."), an unknown one refused, and a
// feature kiln lacks refused as not_supported naming it.
#include <algorithm>

#include "api/daytona/daytona.h"
#include "api/errors.h"
#include "api/validate.h"
#include "common/contract.h"

namespace kiln::api::daytona {

using nlohmann::json;

namespace {

constexpr size_t kSnapshotNameMax = 256;
constexpr size_t kDockerfileMax = 1 << 20;
constexpr size_t kContextHashesMax = 256;
constexpr int64_t kMinutesMax = 60 * 24 * 365;  // a year: longer means "never" to Daytona too
constexpr int kSessionIdMax = 128;
constexpr size_t kDownloadPathsMax = 1000;
constexpr size_t kPathMax = contract::kPathMax;
constexpr size_t kEnvMax = 256, kEnvKeyMax = 256;

[[noreturn]] void Refuse(const std::string& feature, const std::string& why) {
  throw ApiError(Unsupported(feature, why));
}

// Splits Daytona's comma-separated list ("10.0.0.0/8, 1.2.3.4/32").
std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(std::move(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// The network fields of `f`'s object onto kiln's rules.
network::Policy ReadNetworkFields(FieldReader& f, const std::string& prefix) {
  bool block_all = f.Bool("networkBlockAll").value_or(false);
  std::vector<std::string> allow;
  for (const char* name : {"networkAllowList", "domainAllowList"}) {
    if (auto list = f.String(name, 64 * 1024)) {
      for (auto& item : SplitList(*list)) allow.push_back(std::move(item));
    }
  }
  if (allow.size() > network::kMaxPolicyEntries) {
    f.Issue("networkAllowList", "at most " + std::to_string(network::kMaxPolicyEntries) +
                                    " entries with domainAllowList");
    return network::Policy{};
  }
  // An allow list is the only way out; block-all without one is no way out.
  json rules{{"internet", !block_all || !allow.empty()}, {"allow", allow}, {"deny", json::array()}};
  network::PolicyError error;
  auto parsed = network::ParsePolicy(rules, "network", &error);
  if (!parsed) {
    f.Issue(error.path.starts_with("network.allow") ? "networkAllowList" : error.path,
            error.message);
    return network::Policy{};
  }
  (void)prefix;
  return *parsed;
}

int ShapeField(FieldReader& f, const char* name, const contract::IntField& mib, int per_unit) {
  // Daytona's memory and disk are GiB; kiln's bounds are MiB.
  auto v = f.Int(name, std::max<int64_t>(1, mib.min / per_unit), mib.max / per_unit);
  return v ? static_cast<int>(*v * per_unit) : static_cast<int>(mib.def);
}

// An exec's or a code run's `envs` and `timeout` (seconds; none or 0 is
// Daytona's "no timeout": kiln's longest command).
void ReadEnvsAndTimeout(FieldReader& f, ExecRequest& r) {
  if (auto envs = f.StringMap("envs", kEnvMax, kEnvKeyMax, contract::kCommandEnvValueMax))
    r.command.env = *envs;
  int64_t timeout = f.Int("timeout", 0, contract::kExecTimeoutMs.max / 1000).value_or(0);
  r.options.timeout_ms = timeout > 0 ? timeout * 1000 : contract::kExecTimeoutMs.max;
}

}  // namespace

network::Policy ReadNetwork(const json& body, const std::string& prefix) {
  FieldReader f(body, prefix);
  network::Policy policy = ReadNetworkFields(f, prefix);
  f.Finish();
  return policy;
}

CreateRequest ReadCreate(const json& body, const contract::IntField& lease) {
  FieldReader f(body);
  CreateRequest r;
  control::SandboxSpec& spec = r.spec;
  if (auto name = f.String("name", 63)) spec.name = *name;
  if (auto user = f.String("user", 64); user && !user->empty())
    Refuse("user", "a kiln sandbox runs as its image's user, with sudo");
  if (auto env = f.StringMap("env", kEnvMax, kEnvKeyMax, contract::kSandboxEnvValueMax))
    spec.env = *env;
  if (auto labels = f.StringMap("labels", contract::kLabelsMax, contract::kLabelKeyMax,
                                contract::kLabelValueMax))
    spec.labels = *labels;
  if (auto pub = f.Bool("public"); pub && *pub)
    Refuse("public", "every port of a kiln sandbox is reached through its preview token");
  (void)f.String("target", 64);  // one host: every region is this one
  // Daytona stops a sandbox idle for autoStopInterval minutes (0: never),
  // and start() brings it back: kiln's idle pause, which keeps memory too.
  int64_t stop = f.Int("autoStopInterval", 0, kMinutesMax).value_or(kDefaultAutoStopMinutes);
  int64_t pause = f.Int("autoPauseInterval", 0, kMinutesMax).value_or(0);
  int64_t idle = pause > 0 ? pause : stop;
  spec.idle_pause_seconds = static_cast<int>(std::min<int64_t>(idle * 60, lease.max));
  (void)f.Int("autoArchiveInterval", 0, kMinutesMax);  // kiln keeps a stopped sandbox as it is
  // 0: deleted as it stops (Daytona's ephemeral sandboxes).
  if (auto del = f.Int("autoDeleteInterval", -1, kMinutesMax); del && *del == 0)
    spec.delete_on_lease_end = true;
  // A Daytona sandbox lives until it is stopped or deleted: kiln's longest
  // lease, or ttlMinutes.
  int64_t ttl = f.Int("ttlMinutes", 0, kMinutesMax).value_or(0);
  spec.timeout_seconds =
      static_cast<int>(ttl > 0 ? std::clamp<int64_t>(ttl * 60, lease.min, lease.max) : lease.max);
  if (auto q = f.Int("queueTimeout", 1, 3600)) r.queue_timeout_seconds = static_cast<int>(*q);
  if (const json* volumes = f.Raw("volumes"); volumes && !volumes->empty())
    Refuse("volumes", "kiln has no volumes yet; keep data in a snapshot or an image");
  if (const json* secrets = f.Raw("secrets"); secrets && !secrets->empty())
    Refuse("secrets", "kiln keeps no secrets for sandboxes; pass them in env");
  for (const char* name : {"outboundProxyUrl", "otelEndpointOverride", "linkedSandbox"})
    if (const json* v = f.Raw(name); v && !v->is_null())
      Refuse(name, "kiln sandboxes have no such setting");
  if (auto kvm = f.Bool("kvm"); kvm && *kvm)
    Refuse("kvm", "kiln sandboxes run under gVisor, without a virtual /dev/kvm");
  (void)f.Bool("spot");  // every kiln sandbox is the same kind
  spec.network = ReadNetworkFields(f, "body");
  if (auto snapshot = f.String("snapshot", kSnapshotNameMax); snapshot && !snapshot->empty())
    r.snapshot = *snapshot;
  if (const json* build = f.Raw("buildInfo")) {
    FieldReader b(*build, "body.buildInfo");
    r.dockerfile = b.String("dockerfileContent", kDockerfileMax);
    if (!r.dockerfile) b.Issue("dockerfileContent", "is required: the Dockerfile's text");
    r.context_hashes =
        b.StringList("contextHashes", kContextHashesMax).value_or(std::vector<std::string>{});
    b.Finish();
    if (r.snapshot) f.Issue("snapshot", "a create names a snapshot or a buildInfo, not both");
  }
  spec.shape.vcpu = static_cast<int>(f.Int("cpu", contract::kVcpu));
  spec.shape.memory_mib = ShapeField(f, "memory", contract::kMemoryMiB, 1024);
  spec.shape.disk_mib = ShapeField(f, "disk", contract::kDiskMiB, 1024);
  spec.shape_given = {f.has("cpu"), f.has("memory"), f.has("disk")};
  if (auto gpu = f.Int("gpu", 0, 64); gpu && *gpu > 0) Refuse("gpu", "kiln sandboxes have no GPUs");
  if (const json* types = f.Raw("gpuType"); types && !types->empty())
    Refuse("gpuType", "kiln sandboxes have no GPUs");
  f.Finish();
  return r;
}

ExecRequest ReadExecute(const json& body) {
  FieldReader f(body);
  ExecRequest r;
  auto command = f.String("command", contract::kCommandMax);
  if (!command) f.Issue("command", "is required");
  // Daytona's daemon runs the command with a shell.
  r.command.command = command.value_or("");
  if (auto cwd = f.String("cwd", kPathMax); cwd && !cwd->empty()) r.command.cwd = *cwd;
  ReadEnvsAndTimeout(f, r);
  f.Finish();
  return r;
}

ExecRequest ReadCodeRun(const json& body) {
  FieldReader f(body);
  ExecRequest r;
  auto code = f.String("code", contract::kCommandMax);
  if (!code) f.Issue("code", "is required");
  std::string language = f.String("language", 32).value_or("python");
  std::vector<std::string> argv = f.StringList("argv", 256).value_or(std::vector<std::string>{});
  // The code is the interpreter's program: python3 -c CODE, or node (with
  // TypeScript's types stripped) reading it as the script.
  if (language == "python") {
    r.command.argv = std::vector<std::string>{"python3", "-c", code.value_or("")};
  } else if (language == "javascript" || language == "typescript") {
    r.command.argv = std::vector<std::string>{"node"};
    if (language == "typescript") r.command.argv->push_back("--experimental-strip-types");
    r.command.argv->insert(r.command.argv->end(), {"-e", code.value_or("")});
  } else {
    f.Issue("language", "must be python, typescript or javascript");
  }
  if (!argv.empty() && r.command.argv) {  // the program's sys.argv[1:] / process.argv
    r.command.argv->insert(r.command.argv->end(), argv.begin(), argv.end());
  }
  ReadEnvsAndTimeout(f, r);
  f.Finish();
  return r;
}

SessionExec ReadSessionExec(const json& body) {
  FieldReader f(body);
  SessionExec r;
  auto command = f.String("command", contract::kCommandMax);
  if (!command) f.Issue("command", "is required");
  r.command = command.value_or("");
  r.run_async = f.Bool("runAsync").value_or(false);
  // The deprecated spelling, as the SDK still accepts it.
  if (auto old = f.Bool("async"); old && *old) r.run_async = true;
  (void)f.Bool("suppressInputEcho");  // no input is echoed: a session's stdin is empty
  f.Finish();
  return r;
}

std::string ParseSessionId(const std::string& text, const std::string& field) {
  bool ok = !text.empty() && text.size() <= kSessionIdMax && text != "." && text != "..";
  for (char c : text) {
    bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '.' || c == '_' || c == '-';
    ok = ok && allowed;
  }
  if (!ok)
    throw InvalidField(field, "must be 1 to " + std::to_string(kSessionIdMax) +
                                  " characters of A-Z a-z 0-9 . _ - (not . or ..)");
  return text;
}

std::vector<std::string> ReadDownloadPaths(const json& body) {
  FieldReader f(body);
  auto paths = f.StringList("paths", kDownloadPathsMax);
  if (!paths) f.Issue("paths", "is required: the files to download");
  for (size_t i = 0; paths && i < paths->size(); ++i) {
    if ((*paths)[i].empty() || (*paths)[i].size() > kPathMax)
      f.Issue("paths[" + std::to_string(i) + "]", "must be a path of 1 to 4096 bytes");
  }
  f.Finish();
  return paths.value_or(std::vector<std::string>{});
}

}  // namespace kiln::api::daytona
