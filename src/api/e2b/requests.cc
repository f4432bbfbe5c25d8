// E2B's request bodies and queries, read into kiln's requests with
// FieldReader: a bad field is named ("body.timeout: ..."), an unknown one
// refused, and a feature kiln lacks refused as not_supported naming it.
#include <algorithm>
#include <charconv>

#include "api/e2b/routes.h"
#include "api/errors.h"
#include "api/request_target.h"
#include "api/validate.h"
#include "common/contract.h"
#include "common/time.h"
#include "network/policy.h"

namespace kiln::api::e2b {

using nlohmann::json;

namespace request_fields {
namespace {

// E2B's timeouts run from 1 s to kiln's longest lease; one shorter than
// kiln's least lease is reached by shortening the lease after the start.
// The longest metadata filter and nextToken read.
constexpr size_t kMetadataFilterMax = 8192;
constexpr size_t kNextTokenMax = 32;

[[noreturn]] void Refuse(const std::string& feature, const std::string& why) {
  throw ApiError(Code::kNotSupported, feature + " is not offered by kiln: " + why,
                 json{{"feature", feature}});
}

// E2B's egress onto kiln's rules. In E2B, allow_internet_access false is
// denyOut 0.0.0.0/0, and allowOut entries are exceptions to denyOut. kiln
// has internet on/off, an allow list (when not empty, only it is reachable)
// and a deny list that wins over it. So: everything denied (by default in
// kiln, by allow_internet_access false, or by denyOut 0.0.0.0/0) with
// allowOut is internet on for allowOut alone; without allowOut it is
// internet off. With the internet allowed, denyOut is kiln's deny list; an
// allowOut beside a partial denyOut (an exception kiln cannot express) is
// refused by name. The rest of E2B's network config is refused by name.
// `f` reads the object holding allowOut and denyOut (a create's network,
// or the body of PUT .../network); `where` prefixes the names refused.
network::Policy ReadEgress(FieldReader& f, bool internet, const std::string& where) {
  std::vector<std::string> allow, deny;
  bool deny_all = !internet;
  allow = f.StringList("allowOut", network::kMaxPolicyEntries).value_or(allow);
  for (auto& d : f.StringList("denyOut", network::kMaxPolicyEntries).value_or(deny)) {
    if (d == "0.0.0.0/0" || d == "::/0")
      deny_all = true;
    else
      deny.push_back(std::move(d));
  }
  // Every port of a kiln sandbox needs its token already.
  if (auto pub = f.Bool("allowPublicTraffic"); pub && *pub)
    Refuse(where + "allowPublicTraffic",
           "every port of a kiln sandbox needs its traffic access token");
  for (const char* name : {"egressProxy", "maskRequestHost", "rules", "dnsServers", "httpsPorts"})
    if (f.Raw(name)) Refuse(where + name, "kiln's egress rules are allow and deny lists");
  if (!deny_all && !allow.empty() && !deny.empty())
    Refuse(where + "allowOut as exceptions to denyOut",
           "kiln's deny list wins over its allow list; deny everything (denyOut 0.0.0.0/0) and "
           "allow what is needed instead");
  json rules{{"internet", deny_all ? !allow.empty() : true},
             {"allow", deny_all ? allow : std::vector<std::string>{}},
             {"deny", deny}};
  network::PolicyError error;
  auto parsed = network::ParsePolicy(rules, "network", &error);
  if (!parsed) {
    std::string path = error.path;
    if (path.starts_with("network.allow"))
      path.replace(0, 13, "allowOut");
    else if (path.starts_with("network.deny"))
      path.replace(0, 12, "denyOut");
    f.Issue(path, error.message);
    return network::Policy{};
  }
  return *parsed;
}

// A create's `network`, with its allow_internet_access.
void ReadNetwork(FieldReader& outer, bool internet, const json* raw, network::Policy* policy) {
  if (raw && !raw->is_object()) {
    outer.Issue("network", "must be an object");
    return;
  }
  json body = raw ? WithoutNulls(*raw) : json::object();  // FieldReader keeps a reference
  FieldReader f(body, "body.network");
  *policy = ReadEgress(f, internet, "network.");
  f.Finish();
}

}  // namespace
}  // namespace request_fields

json WithoutNulls(const json& body) {
  if (!body.is_object()) return body;
  json out = json::object();
  for (const auto& [k, v] : body.items())
    if (!v.is_null()) out[k] = v;
  return out;
}

CreateRequest ReadCreate(const json& raw_body, const contract::IntField& lease) {
  using request_fields::ReadNetwork;
  using request_fields::Refuse;
  json body = WithoutNulls(raw_body);
  FieldReader f(body);
  CreateRequest r;
  control::SandboxSpec& spec = r.spec;
  auto t = f.String("templateID", 256);
  if (!t && !f.has("templateID"))
    f.Issue("templateID", "is required: a template, such as \"base\"");
  if (t && t->empty()) f.Issue("templateID", "must name a template, such as \"base\"");
  r.template_id = t.value_or("");
  r.timeout_seconds =
      static_cast<int>(f.Int("timeout", 1, lease.max).value_or(kDefaultTimeoutSeconds));
  // kiln's least lease; a shorter E2B timeout is set on the lease after.
  spec.timeout_seconds = std::max<int>(r.timeout_seconds, static_cast<int>(lease.min));
  if (auto m = f.StringMap("metadata", contract::kLabelsMax, contract::kLabelKeyMax,
                           contract::kLabelValueMax))
    spec.labels = *m;
  if (auto env = f.StringMap("envVars", 256, 256, contract::kSandboxEnvValueMax)) {
    for (const auto& [k, v] : *env)
      if (!ValidEnvName(k)) f.Issue("envVars." + k, "is not an environment variable name");
    spec.env = *env;
  }
  // E2B's sandboxes reach the internet unless told otherwise; kiln's are
  // offline unless asked: allow_internet_access true turns it on.
  network::Policy policy;
  bool internet = f.Bool("allow_internet_access").value_or(false);
  ReadNetwork(f, internet, f.Raw("network"), &policy);
  spec.network = policy;
  // autoPause: the lease's end pauses instead of killing.
  spec.pause_on_lease_end = f.Bool("autoPause").value_or(false);
  // mode "filesystem" (keep_memory false): the lease's end keeps the files only.
  if (auto memory = f.Bool("autoPauseMemory")) spec.pause_memory = *memory;
  // E2B's traffic wakes a paused sandbox only when autoResume is on.
  spec.auto_wake = false;
  if (const json* resume = f.Raw("autoResume")) {
    if (!resume->is_object() || (resume->contains("enabled") && !(*resume)["enabled"].is_boolean()))
      f.Issue("autoResume", "must be {\"enabled\": true|false}");
    else
      spec.auto_wake = resume->value("enabled", spec.auto_wake);
  }
  f.Bool("secure");  // kiln's sandboxes always need their access tokens
  if (const json* v = f.Raw("volumeMounts"); v && !(v->is_array() && v->empty()))
    Refuse("volumeMounts", "kiln has no volumes; keep data in a snapshot or an image");
  if (f.Raw("mcp")) Refuse("mcp", "kiln runs no MCP gateway");
  if (const json* v = f.Raw("iam"); v && !(v->is_object() && v->empty()))
    Refuse("iam", "kiln issues no workload identity tokens");
  f.Finish();
  return r;
}

ConnectRequest ReadConnect(const json& raw_body, const contract::IntField& lease) {
  using request_fields::Refuse;
  json body = WithoutNulls(raw_body);
  FieldReader f(body);
  ConnectRequest c;
  if (auto t = f.Int("timeout", 1, lease.max)) c.timeout_seconds = static_cast<int>(*t);
  c.reboot = !f.Bool("memory").value_or(true);
  c.auto_pause = f.Bool("autoPause");
  f.Finish();
  return c;
}

int ReadTimeout(const json& raw_body, const contract::IntField& lease) {
  json body = WithoutNulls(raw_body);
  FieldReader f(body);
  // 0 ends the lease now: the sandbox's on-timeout action runs (E2B's SDK
  // forces an auto-pause so).
  auto t = f.Int("timeout", 0, lease.max);
  if (!t && !f.has("timeout")) f.Issue("timeout", "is required: seconds from now");
  f.Finish();
  return static_cast<int>(t.value_or(0));
}

int ReadRefresh(const json& raw_body) {
  json body = WithoutNulls(raw_body);
  FieldReader f(body);
  auto d = f.Int("duration", 0, contract::kTimeoutSeconds.max);
  f.Finish();
  return static_cast<int>(d.value_or(60));
}

std::optional<bool> ReadPause(const json& raw_body) {
  json body = WithoutNulls(raw_body);
  FieldReader f(body);
  auto memory = f.Bool("memory");
  f.Bool("requireHealthyGuest");
  f.Finish();
  return memory;
}

ForkRequest ReadFork(const json& body, const contract::IntField& lease) {
  FieldReader f(body);
  auto timeout = f.Int("timeout", 1, lease.max);
  auto count = f.Int("count", contract::kForkCount.min, contract::kForkCount.max);
  f.Finish();
  ForkRequest r;
  if (timeout) r.timeout = static_cast<int>(*timeout);
  r.count = static_cast<int>(count.value_or(1));
  return r;
}

network::Policy ReadNetworkUpdate(const json& raw_body) {
  json body = WithoutNulls(raw_body);
  FieldReader f(body);
  // The update replaces the whole configuration: what it leaves out is
  // cleared, so an empty one is E2B's default, the internet allowed.
  bool internet = f.Bool("allow_internet_access").value_or(true);
  network::Policy policy = request_fields::ReadEgress(f, internet, "");
  f.Finish();
  return policy;
}

control::SnapshotOptions ReadSnapshot(const json& body) {
  FieldReader f(body);
  control::SnapshotOptions opts;
  if (auto v = f.String("name", contract::kSnapshotNameMax)) opts.name = *v;
  if (auto memory = f.Bool("memory"); memory && !*memory) opts.mode = store::SnapshotMode::kDisk;
  f.Finish();
  return opts;
}

std::vector<std::pair<std::string, std::string>> ParseMetadataFilter(const std::string& text) {
  if (text.size() > request_fields::kMetadataFilterMax)
    throw InvalidField(
        "query.metadata",
        "must be at most " + std::to_string(request_fields::kMetadataFilterMax) + " bytes");
  std::vector<std::pair<std::string, std::string>> out;
  if (text.empty()) return out;
  RequestTarget parsed;
  try {
    parsed = ParseRequestTarget("/?" + text);
  } catch (const ApiError&) {
    throw InvalidField("query.metadata", "must be key=value pairs joined by &, percent-encoded");
  }
  for (auto& [k, v] : parsed.query) {
    if (k.empty()) throw InvalidField("query.metadata", "has a pair without a key");
    if (out.size() >= static_cast<size_t>(contract::kLabelsMax))
      throw InvalidField("query.metadata",
                         "must have at most " + std::to_string(contract::kLabelsMax) + " pairs");
    out.emplace_back(std::move(k), std::move(v));
  }
  return out;
}

std::string NextToken(size_t next_offset) { return std::to_string(next_offset); }

namespace {

// A query's Unix seconds, in ms.
std::optional<int64_t> UnixSeconds(const std::optional<std::string>& text, const char* field) {
  if (!text) return std::nullopt;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || p != text->data() + text->size() || v < 0 || v > 253402300799)
    throw InvalidField(std::string("query.") + field, "must be a Unix time in seconds");
  return v * 1000;
}

}  // namespace

MetricsWindow ReadMetricsWindow(
    const std::function<std::optional<std::string>(const std::string&)>& get, int64_t created_ms,
    int64_t now_ms) {
  MetricsWindow w{created_ms, now_ms};
  if (auto from = UnixSeconds(get("start"), "start")) w.from_ms = *from;
  // Seconds: the whole of the last one.
  if (auto to = UnixSeconds(get("end"), "end")) w.to_ms = *to + 999;
  if (w.to_ms < w.from_ms) throw InvalidField("query.end", "must not be before start");
  return w;
}

std::vector<std::string> ReadMetricsSandboxIds(const std::optional<std::string>& ids) {
  std::vector<std::string> out;
  if (!ids || ids->empty())
    throw InvalidField("query.sandbox_ids", "is required: ids, comma-separated");
  size_t start = 0;
  while (start <= ids->size()) {
    size_t end = std::min(ids->find(',', start), ids->size());
    if (end > start) out.push_back(ids->substr(start, end - start));
    if (out.size() > static_cast<size_t>(kMaxPageSize))
      throw InvalidField("query.sandbox_ids",
                         "names at most " + std::to_string(kMaxPageSize) + " sandboxes");
    start = end + 1;
  }
  if (out.empty()) throw InvalidField("query.sandbox_ids", "is required: ids, comma-separated");
  return out;
}

ListQuery ReadListQuery(const std::function<std::optional<std::string>(const std::string&)>& get) {
  ListQuery q;
  if (auto m = get("metadata")) q.metadata = ParseMetadataFilter(*m);
  if (auto s = get("state")) {
    q.running = q.paused = false;
    size_t start = 0;
    while (start <= s->size()) {
      size_t end = std::min(s->find(',', start), s->size());
      std::string word = s->substr(start, end - start);
      if (word == "running")
        q.running = true;
      else if (word == "paused")
        q.paused = true;
      else
        throw InvalidField(
            "query.state",
            "must be running, paused or both (comma-separated), not '" + word.substr(0, 32) + "'");
      start = end + 1;
    }
  }
  if (auto a = get("startedAfter")) {
    auto ms = ParseTime(*a);
    if (!ms) throw InvalidField("query.startedAfter", "must be an RFC 3339 time");
    q.started_after_ms = *ms;
  }
  if (auto t = get("template")) {
    if (t->empty() || t->size() > 256)
      throw InvalidField("query.template", "must be a template name of 1 to 256 bytes");
    q.template_id = *t;
  }
  if (auto o = get("order")) {
    if (*o != "asc" && *o != "desc") throw InvalidField("query.order", "must be asc or desc");
    q.descending = *o == "desc";
  }
  if (auto l = get("limit")) {
    int v = 0;
    auto [p, ec] = std::from_chars(l->data(), l->data() + l->size(), v);
    if (ec != std::errc() || p != l->data() + l->size() || v < 1 || v > kMaxPageSize)
      throw InvalidField("query.limit", "must be 1 to " + std::to_string(kMaxPageSize));
    q.limit = v;
  }
  if (auto n = get("nextToken"); n && !n->empty()) {
    size_t v = 0;
    auto [p, ec] = std::from_chars(n->data(), n->data() + n->size(), v);
    if (n->size() > request_fields::kNextTokenMax || ec != std::errc() ||
        p != n->data() + n->size())
      throw InvalidField("query.nextToken", "must be a token from x-next-token");
    q.offset = v;
  }
  return q;
}

}  // namespace kiln::api::e2b
