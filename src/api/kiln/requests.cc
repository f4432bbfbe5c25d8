// kiln's requests (requests.h): the members several bodies share,
// sandboxes, snapshots and forks, network rules, keys, previews, usage.
#include "api/kiln/requests.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <regex>
#include <stdexcept>

#include "api/context.h"
#include "api/errors.h"
#include "common/contract.h"
#include "common/time.h"

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

// An issue of a policy error, in FieldReader's terms.
void AddPolicyIssue(FieldReader& f, const network::PolicyError& error, const std::string& whole) {
  f.Issue(error.path.empty() ? whole : error.path, error.message);
}

// The name member of a create, a fork or an update.
void CheckSandboxName(FieldReader& f, const std::string& name) {
  if (!ValidSandboxName(name)) f.Issue("name", "may hold only letters, digits, '.', '_' and '-'");
}

// idlePauseSeconds of a create or an update.
std::optional<int> ReadIdlePause(FieldReader& f) {
  auto v = f.Int("idlePauseSeconds", 0, 86400);
  if (!v) return std::nullopt;
  if (*v != 0 && *v < 10) f.Issue("idlePauseSeconds", "must be 0 (never) or 10 to 86400");
  return static_cast<int>(*v);
}

// A cursor of a previous page: a decimal count, else 400 naming query.cursor.
template <typename T, typename Parse>
T ReadCursor(Exchange& ex, Parse parse) {
  auto c = ex.Query("cursor");
  if (!c) return T{};
  try {
    return parse(*c);
  } catch (...) {
    throw InvalidField("query.cursor", "is not a cursor from a previous answer");
  }
}

constexpr int kEgressLogPageMax = 500;

constexpr int64_t kPreviewDayMs = 86400000;
constexpr int64_t kPreviewMinTtlMs = 60000, kPreviewMaxTtlMs = 7 * kPreviewDayMs;

int64_t ReadQueryTime(Exchange& ex, const std::string& name, int64_t def) {
  auto v = ex.Query(name);
  if (!v) return def;
  auto t = ParseTime(*v);
  if (!t) throw InvalidField("query." + name, "must be an RFC 3339 time like 2026-11-29T10:00:00Z");
  return *t;
}

// A chart's worth: a day in 5-minute buckets is 288.
constexpr int64_t kMaxUsageBuckets = 500;

}  // namespace

// ---- Members several bodies share ----

std::optional<network::Policy> ReadNetworkField(FieldReader& f) {
  const json* raw = f.Raw("network");
  if (!raw || raw->is_null()) return std::nullopt;
  network::PolicyError error;
  auto policy = network::ParsePolicy(*raw, "network", &error);
  if (!policy) AddPolicyIssue(f, error, "network");
  return policy;
}

std::optional<std::map<std::string, std::string>> ReadLabels(FieldReader& f) {
  return f.StringMap("labels", contract::kLabelsMax, contract::kLabelKeyMax,
                     contract::kLabelValueMax);
}

bool ValidSandboxName(const std::string& name) {
  static const std::regex kName("[A-Za-z0-9._-]+");
  return std::regex_match(name, kName);
}

std::optional<int> ReadPool(const json& body) {
  FieldReader f(body);
  auto size = f.Int("size", contract::kPoolSize.min, contract::kPoolSize.max);
  auto automatic = f.Bool("auto");
  if (f.has("size") && f.has("auto"))
    f.Issue("auto", "give either size (a pinned pool) or auto, not both");
  else if (!f.has("size") && !f.has("auto"))
    f.Issue("size", "is required (or auto: true, for a pool sized by demand)");
  else if (f.has("auto") && automatic && !*automatic)
    f.Issue("auto", "must be true (to pin a size, give size)");
  f.Finish();
  if (size) return static_cast<int>(*size);
  return std::nullopt;
}

std::optional<int> ParsePort(std::string_view s) {
  int port = 0;
  if (s.empty() || s.size() > 5) return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), port);
  if (ec != std::errc() || end != s.data() + s.size() || port < 1 || port > 65535)
    return std::nullopt;
  return port;
}

int ReadPortParam(Exchange& ex) {
  auto port = ParsePort(ex.params["port"]);
  if (!port) throw InvalidField("path.port", "must be a port number from 1 to 65535");
  return *port;
}

// ---- Sandboxes ----

CreateRequest ReadCreate(const json& body, const contract::IntField& lease) {
  FieldReader f(body);
  CreateRequest req;
  control::SandboxSpec& spec = req.spec;
  spec.shape.vcpu = static_cast<int>(f.Int("vcpu", contract::kVcpu));
  spec.shape.memory_mib = static_cast<int>(f.Int("memoryMiB", contract::kMemoryMiB));
  spec.shape.disk_mib = static_cast<int>(f.Int("diskMiB", contract::kDiskMiB));
  spec.shape_given = {f.has("vcpu"), f.has("memoryMiB"), f.has("diskMiB")};
  spec.timeout_seconds = static_cast<int>(f.Int("timeoutSeconds", lease));
  if (auto v = f.String("onLeaseEnd", 16)) {
    if (*v != "stop" && *v != "pause" && *v != "delete")
      f.Issue("onLeaseEnd", "must be \"pause\", \"stop\" or \"delete\"");
    spec.pause_on_lease_end = *v == "pause";
    spec.delete_on_lease_end = *v == "delete";
  }
  spec.pausable = f.Bool("pausable").value_or(true);
  if (auto v = ReadIdlePause(f)) spec.idle_pause_seconds = *v;
  spec.auto_wake = f.Bool("autoWake").value_or(true);
  spec.persistent = f.Bool("persistent").value_or(false);
  spec.pause_memory = f.Bool("pauseMemory").value_or(true);
  spec.sudo = f.Bool("sudo").value_or(true);
  if (!spec.pausable && spec.persistent)
    f.Issue("persistent", "a persistent sandbox must be pausable (it pauses at its lease end)");
  if (!spec.pausable && spec.idle_pause_seconds > 0)
    f.Issue("idlePauseSeconds", "needs a pausable sandbox");
  if (!spec.pausable && spec.pause_on_lease_end)
    f.Issue("onLeaseEnd", "\"pause\" needs a pausable sandbox");
  if (auto v = f.Int("maxTotalCostMicros", 0, contract::kMaxCostMicrosMax))
    spec.max_total_cost_micros = *v;
  req.get_or_create = f.Bool("getOrCreate").value_or(false);
  req.cpu_floor_millis = f.Int("cpuFloorMillis", 0, 1000);
  // The reference's fields with no meaning on one host: accepted, ignored.
  f.String("funding", 16);
  f.String("region", 64);
  if (f.has("volumes"))
    throw ApiError(Code::kNotSupported,
                   "body.volumes: kiln has no volumes; keep data in a snapshot or an image");
  if (auto v = f.Int("maxCostMicros", 0, contract::kMaxCostMicrosMax)) spec.max_cost_micros = *v;
  if (auto v = f.String("name", contract::kSandboxNameMax)) {
    CheckSandboxName(f, *v);
    spec.name = *v;
  }
  if (auto v = ReadLabels(f)) spec.labels = *v;
  if (auto v = f.String("snapshot", 64)) {
    if (v->empty()) f.Issue("snapshot", "must be a snapshot id");
    spec.snapshot = *v;
  }
  if (auto v = f.StringMap("env", 32, 256, contract::kSandboxEnvValueMax)) {
    size_t total = 0;
    for (const auto& [k, val] : *v) {
      if (!ValidEnvName(k)) f.Issue("env." + k, "is not a valid variable name");
      if (val.find('\0') != std::string::npos) f.Issue("env." + k, "must not contain a NUL byte");
      total += k.size() + val.size();
    }
    if (total > contract::kSandboxEnvValueMax) f.Issue("env", "must total at most 32 KiB");
    spec.env = *v;
  }
  spec.network = ReadNetworkField(f);
  if (auto v = f.String("image", 256)) {
    if (v->empty()) f.Issue("image", "must name an image: an id, name, name:tag or name@version");
    if (spec.snapshot) f.Issue("image", "give an image or a snapshot, not both");
    req.image = *v;
  }
  if (req.get_or_create && !spec.name) f.Issue("getOrCreate", "needs a name");
  f.Finish();
  return req;
}

int ReadExtend(const json& body) {
  FieldReader f(body);
  auto seconds = f.Int("seconds", contract::kExtendSeconds.min, contract::kExtendSeconds.max);
  if (!seconds && !f.has("seconds")) f.Issue("seconds", "is required");
  f.Finish();
  return static_cast<int>(*seconds);
}

control::SandboxUpdate ReadUpdate(const json& body) {
  FieldReader f(body);
  control::SandboxUpdate u;
  auto is_null = [&](const char* k) {
    return body.is_object() && body.contains(k) && body[k].is_null();
  };
  if (is_null("name")) u.name = std::optional<std::string>();
  if (auto v = f.String("name", contract::kSandboxNameMax)) {
    CheckSandboxName(f, *v);
    u.name = *v;
  }
  u.labels = ReadLabels(f);
  if (const json* env = f.Raw("env")) {
    if (!env->is_object()) {
      f.Issue("env", "must be an object of names to strings (or null to remove one)");
    } else {
      for (const auto& [k, v] : env->items()) {
        if (!ValidEnvName(k)) f.Issue("env." + k, "is not a valid variable name");
        if (v.is_null()) {
          u.env[k] = std::nullopt;
        } else if (!v.is_string() || v.get<std::string>().size() > contract::kSandboxEnvValueMax ||
                   v.get<std::string>().find('\0') != std::string::npos) {
          f.Issue("env." + k, "must be a string without NUL bytes, at most 32 KiB, or null");
        } else {
          u.env[k] = v.get<std::string>();
        }
      }
    }
  }
  u.auto_wake = f.Bool("autoWake");
  u.idle_pause_seconds = ReadIdlePause(f);
  u.persistent = f.Bool("persistent");
  if (is_null("maxTotalCostMicros")) u.max_total_cost_micros = std::optional<int64_t>();
  if (auto v = f.Int("maxTotalCostMicros", 0, contract::kMaxCostMicrosMax))
    u.max_total_cost_micros = *v;
  f.Finish();
  return u;
}

std::optional<bool> ReadPauseMemory(const json& body) {
  FieldReader f(body);
  auto memory = f.Bool("memory");
  f.Finish();
  return memory;
}

std::optional<int> ReadWake(const json& body, const contract::IntField& lease) {
  FieldReader f(body);
  std::optional<int> timeout;
  if (f.has("timeoutSeconds")) timeout = static_cast<int>(f.Int("timeoutSeconds", lease));
  f.Finish();
  return timeout;
}

SandboxListQuery ReadSandboxList(Exchange& ex) {
  SandboxListQuery q;
  for (const auto& name : ex.QueryAll("state")) {
    auto state = control::ParseState(name);
    if (!state)
      throw InvalidField("query.state",
                         "must be starting, running, pausing, paused, resuming, stopping or "
                         "stopped");
    q.filter.states.push_back(*state);
  }
  q.filter.name = ex.Query("name");
  for (const auto& l : ex.QueryAll("label")) {
    size_t colon = l.find(':');
    if (colon == std::string::npos || colon == 0)
      throw InvalidField("query.label", "must be key:value");
    q.filter.labels.emplace_back(l.substr(0, colon), l.substr(colon + 1));
  }
  q.filter.include_stopped = ex.Query("includeStopped").value_or("") == "true";
  q.limit = static_cast<int>(QueryInt(ex, "limit", 1, 500, 100));
  q.start = ReadCursor<size_t>(ex, [](const std::string& c) { return std::stoul(c); });
  return q;
}

MetricsRange ReadMetricsRange(Exchange& ex) {
  // runtime-api.md's buckets; past a day, hourly points.
  static constexpr struct {
    const char* name;
    int64_t back_ms, span_ms;
  } kRanges[] = {{"15m", 15 * 60000LL, 10000},    {"1h", 3600000LL, 20000},
                 {"6h", 6 * 3600000LL, 120000},   {"24h", 24 * 3600000LL, 480000},
                 {"7d", 7 * 86400000LL, 3600000}, {"30d", 30 * 86400000LL, 3600000}};
  std::string range = ex.Query("range").value_or("15m");
  for (const auto& r : kRanges) {
    if (range == r.name) return MetricsRange{r.back_ms, r.span_ms};
  }
  throw InvalidField("query.range", "must be 15m, 1h, 6h, 24h, 7d or 30d");
}

// ---- Snapshots and forks ----

control::SnapshotOptions ReadSnapshot(const json& body) {
  FieldReader f(body);
  control::SnapshotOptions opts;
  if (auto v = f.String("name", contract::kSnapshotNameMax)) opts.name = *v;
  if (auto v = ReadLabels(f)) opts.labels = *v;
  opts.retention_days = static_cast<int>(f.Int("retentionDays", contract::kRetentionDays));
  if (auto mode = f.String("mode", 16)) {
    if (auto parsed = store::ParseSnapshotMode(*mode))
      opts.mode = *parsed;
    else
      f.Issue("mode", "must be \"memory\" (files, memory and processes) or \"disk\" (files only)");
  }
  f.Finish();
  return opts;
}

control::ForkOptions ReadFork(const json& body) {
  FieldReader f(body);
  control::ForkOptions opts;
  opts.count = static_cast<int>(f.Int("count", contract::kForkCount));
  opts.labels = ReadLabels(f).value_or(std::map<std::string, std::string>{});
  opts.keep_snapshot = f.Bool("keepSnapshot").value_or(false);
  if (auto name = f.String("name", contract::kSandboxNameMax)) {
    CheckSandboxName(f, *name);
    opts.name = *name;
  }
  f.String("funding", 16);  // accepted: a local daemon has no trial
  opts.network = ReadNetworkField(f);
  f.Finish();
  return opts;
}

// ---- Network ----

network::Policy ReadNetworkPut(const json& body) {
  network::PolicyError error;
  std::optional<network::Policy> policy;
  if (body.is_object() && !body.contains("internet")) {
    error = {"internet", "is required: true or false (a PUT replaces every rule)"};
  } else {
    policy = network::ParsePolicy(body, "", &error);
  }
  if (!policy)
    throw InvalidField(error.path.empty() ? "body" : "body." + error.path, error.message);
  return *policy;
}

EgressLogQuery ReadEgressLogQuery(Exchange& ex) {
  EgressLogQuery q;
  q.limit = static_cast<int>(QueryInt(ex, "limit", 1, kEgressLogPageMax, 100));
  q.after = ReadCursor<int64_t>(ex, [](const std::string& c) {
    size_t used = 0;
    int64_t after = std::stoll(c, &used);
    if (used != c.size() || after < 0) throw std::invalid_argument("cursor");
    return after;
  });
  return q;
}

// ---- Keys ----

KeyRequest ReadKey(const json& body) {
  FieldReader f(body);
  KeyRequest req;
  req.name = f.String("name", 128).value_or("");
  // It is printed in `kiln keys ls` tables: no terminal control codes.
  for (unsigned char c : req.name) {
    if (c < 0x20 || c == 0x7f) {
      f.Issue("name", "must not contain control characters");
      break;
    }
  }
  req.daily_limit_micros = f.Int("dailyLimitMicros", 0, std::numeric_limits<int64_t>::max());
  req.admin = f.Bool("admin").value_or(false);
  f.Finish();
  return req;
}

// ---- Previews ----

PreviewRequest ReadPreview(const json& body) {
  FieldReader f(body);
  PreviewRequest req;
  auto port = f.Int("port", 1, 65535);
  if (!port && !f.has("port")) f.Issue("body.port", "is required");
  auto visibility = f.String("visibility", 16);
  if (visibility && *visibility != "private" && *visibility != "public")
    f.Issue("body.visibility", "must be private or public");
  req.ttl_s = f.Int("ttlSeconds", kPreviewMinTtlMs / 1000, kPreviewMaxTtlMs / 1000);
  req.expires_at = f.String("expiresAt", 64);
  if (auto origins = f.StringList("embedOrigins", 16); origins && !origins->empty())
    f.Issue("body.embedOrigins",
            "kiln does not restrict which sites may frame a preview: leave it empty");
  f.Finish();
  req.port = static_cast<int>(*port);
  req.is_public = visibility && *visibility == "public";
  req.ttl_ms = req.ttl_s ? *req.ttl_s * 1000 : kPreviewDayMs;
  return req;
}

std::optional<int64_t> ReadPreviewExpiry(std::optional<int64_t> ttl_s,
                                         const std::optional<std::string>& expires_at,
                                         const std::string& where) {
  std::optional<int64_t> expiry;
  if (ttl_s) expiry = NowMs() + *ttl_s * 1000;
  if (expires_at) {
    auto at = ParseTime(*expires_at);
    if (!at || *at <= NowMs() || *at > NowMs() + kPreviewMaxTtlMs)
      throw InvalidField(where + ".expiresAt", "must be an RFC 3339 time in the next 7 days");
    expiry = expiry ? std::min(*expiry, *at) : *at;
  }
  return expiry;
}

std::optional<int64_t> ReadPreviewExpiryQuery(Exchange& ex) {
  std::optional<int64_t> ttl_s;
  if (ex.Query("ttlSeconds"))
    ttl_s = QueryInt(ex, "ttlSeconds", kPreviewMinTtlMs / 1000, kPreviewMaxTtlMs / 1000, 0);
  return ReadPreviewExpiry(ttl_s, ex.Query("expiresAt"), "query");
}

// ---- Usage ----

std::string ReadUsageGroupBy(Exchange& ex) {
  std::string group_by = ex.Query("groupBy").value_or("");
  if (group_by == "label") {
    auto name = ex.Query("label");
    if (!name || name->empty())
      throw InvalidField("query.label", "names the label to group by (groupBy=label&label=team)");
    group_by = "label:" + *name;
  }
  if (!group_by.empty() && group_by != "key" && group_by.rfind("label:", 0) != 0)
    throw InvalidField("query.groupBy", "must be key, label (with label=NAME) or label:NAME");
  return group_by;
}

UsageSpan ReadUsageSpan(Exchange& ex, int64_t now_ms) {
  UsageSpan span;
  span.to = ReadQueryTime(ex, "to", now_ms + 1);
  span.from = ReadQueryTime(ex, "from", now_ms - 30 * 86400000LL);
  if (span.from >= span.to) throw InvalidField("query.from", "must be before query.to");
  if (ex.Query("bucketSeconds")) {
    span.bucket_ms = QueryInt(ex, "bucketSeconds", 60, 86400, 3600) * 1000;
    if ((span.to - span.from + *span.bucket_ms - 1) / *span.bucket_ms > kMaxUsageBuckets)
      throw InvalidField("query.bucketSeconds",
                         "gives more than " + std::to_string(kMaxUsageBuckets) +
                             " buckets between from and to: use a larger one or a shorter span");
  }
  return span;
}

}  // namespace kiln::api::v1
