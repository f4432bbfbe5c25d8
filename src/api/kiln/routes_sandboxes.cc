// POST/GET /v1/sandboxes, GET /v1/sandboxes/{id}, :stop, DELETE.
#include <regex>

#include "api/auth.h"
#include "api/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/routes.h"
#include "api/validate.h"
#include "common/contract.h"
#include "common/metrics.h"
#include "common/time.h"
#include "images/manager/image_manager.h"

namespace kiln::api {

using nlohmann::json;

namespace {

// Create fields that only steer ReadCreate's caller.
struct CreateExtras {
  std::optional<std::string> image;
  bool get_or_create = false;
  std::optional<int64_t> cpu_floor_millis;  // must be the daemon's price
};

control::SandboxSpec ReadCreate(const json& body, CreateExtras* extras) {
  std::optional<std::string>* image = &extras->image;
  FieldReader f(body);
  control::SandboxSpec spec;
  spec.shape.vcpu = static_cast<int>(f.Int("vcpu", contract::kVcpu));
  spec.shape.memory_mib = static_cast<int>(f.Int("memoryMiB", contract::kMemoryMiB));
  spec.shape.disk_mib = static_cast<int>(f.Int("diskMiB", contract::kDiskMiB));
  spec.shape_given = {f.has("vcpu"), f.has("memoryMiB"), f.has("diskMiB")};
  spec.timeout_seconds = static_cast<int>(f.Int("timeoutSeconds", contract::kTimeoutSeconds));
  if (auto v = f.String("onLeaseEnd", 16)) {
    if (*v != "stop" && *v != "pause" && *v != "delete")
      f.Issue("onLeaseEnd", "must be \"pause\", \"stop\" or \"delete\"");
    spec.pause_on_lease_end = *v == "pause";
    spec.delete_on_lease_end = *v == "delete";
  }
  spec.pausable = f.Bool("pausable").value_or(true);
  if (auto v = f.Int("idlePauseSeconds", 0, 86400)) {
    if (*v != 0 && *v < 10) f.Issue("idlePauseSeconds", "must be 0 (never) or 10 to 86400");
    spec.idle_pause_seconds = static_cast<int>(*v);
  }
  spec.auto_wake = f.Bool("autoWake").value_or(true);
  spec.persistent = f.Bool("persistent").value_or(false);
  spec.sudo = f.Bool("sudo").value_or(true);
  if (!spec.pausable && spec.persistent)
    f.Issue("persistent", "a persistent sandbox must be pausable (it pauses at its lease end)");
  if (!spec.pausable && spec.idle_pause_seconds > 0)
    f.Issue("idlePauseSeconds", "needs a pausable sandbox");
  if (!spec.pausable && spec.pause_on_lease_end)
    f.Issue("onLeaseEnd", "\"pause\" needs a pausable sandbox");
  if (auto v = f.Int("maxTotalCostMicros", 0, contract::kMaxCostMicrosMax))
    spec.max_total_cost_micros = *v;
  extras->get_or_create = f.Bool("getOrCreate").value_or(false);
  extras->cpu_floor_millis = f.Int("cpuFloorMillis", 0, 1000);
  // The reference's fields with no meaning on one host: accepted, ignored.
  f.String("funding", 16);
  f.String("region", 64);
  if (f.has("volumes"))
    throw ApiError(Code::kNotSupported,
                   "body.volumes: kiln has no volumes; keep data in a snapshot or an image");
  if (auto v = f.Int("maxCostMicros", 0, contract::kMaxCostMicrosMax)) spec.max_cost_micros = *v;
  if (auto v = f.String("name", contract::kSandboxNameMax)) {
    if (!ValidSandboxName(*v)) f.Issue("name", "may hold only letters, digits, '.', '_' and '-'");
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
    *image = *v;
  }
  if (extras->get_or_create && !spec.name) f.Issue("getOrCreate", "needs a name");
  f.Finish();
  return spec;
}

}  // namespace

bool ValidSandboxName(const std::string& name) {
  static const std::regex kName("[A-Za-z0-9._-]+");
  return std::regex_match(name, kName);
}

void AddSandboxRoutes(Router& r, ApiContext& ctx) {
  r.Add("GET", "/v1/health", [&ctx](Exchange& ex) {
    control::EngineInfo e = ctx.sandboxes.EngineInfo();
    ex.SendJson(200, json{{"ok", true},
                          {"version", KILN_VERSION},
                          {"time", FormatTime(NowMs())},
                          {"engine",
                           {{"name", e.name},
                            {"version", e.version},
                            {"pinnedVersion", e.pinned_version},
                            {"pinned", e.pinned()}}},
                          {"pools", PoolBudgetJson(ctx.sandboxes.pool_options())}});
  });

  r.Add("POST", "/v1/sandboxes", [&ctx](Exchange& ex) {
    CreateExtras extras;
    launch::LaunchRequest req;
    req.spec = ReadCreate(ex.JsonBody(), &extras);
    const Caller& caller = CallerOf(ex);
    int64_t floor = ctx.sandboxes.prices().cpu_floor_millis;
    if (extras.cpu_floor_millis && *extras.cpu_floor_millis != floor)
      throw InvalidField("body.cpuFloorMillis", "is this kilnd's price, " + std::to_string(floor) +
                                                    " (set by kilnd --prices)");
    req.spec.owner = caller.key_id;
    req.image = extras.image;
    req.scope = OwnerScope(ex);
    req.daily_limit_micros = caller.daily_limit_micros;
    req.get_or_create = extras.get_or_create;
    req.deadline = PreferWaitDeadline(ex);
    req.cancelled = [&ex] { return ex.ClientGone(); };
    launch::Launched launched = ValueOrThrow(ctx.launcher.Launch(std::move(req)));
    if (launched.in_use) ex.activity = launched.in_use;
    json answer = SandboxJson(*launched.sandbox);
    answer["reused"] = launched.reused;
    if (!launched.start.is_null()) answer["start"] = launched.start;
    ex.SendJson(200, answer);
  });

  r.Add("POST", "/v1/sandboxes/{id}:extend", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    auto seconds = f.Int("seconds", contract::kExtendSeconds.min, contract::kExtendSeconds.max);
    if (!seconds && !f.has("seconds")) f.Issue("seconds", "is required");
    f.Finish();
    ValueOrThrow(ctx.launcher.Extend(s, *seconds, PayerOf(ex)));
    ex.SendJson(200, SandboxJson(*s));
  });

  r.Add("POST", "/v1/sandboxes/{id}:update", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    control::SandboxUpdate u;
    auto is_null = [&](const char* k) {
      return body.is_object() && body.contains(k) && body[k].is_null();
    };
    if (is_null("name")) u.name = std::optional<std::string>();
    if (auto v = f.String("name", contract::kSandboxNameMax)) {
      if (!ValidSandboxName(*v)) f.Issue("name", "may hold only letters, digits, '.', '_' and '-'");
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
          } else if (!v.is_string() ||
                     v.get<std::string>().size() > contract::kSandboxEnvValueMax ||
                     v.get<std::string>().find('\0') != std::string::npos) {
            f.Issue("env." + k, "must be a string without NUL bytes, at most 32 KiB, or null");
          } else {
            u.env[k] = v.get<std::string>();
          }
        }
      }
    }
    u.auto_wake = f.Bool("autoWake");
    if (auto v = f.Int("idlePauseSeconds", 0, 86400)) {
      if (*v != 0 && *v < 10) f.Issue("idlePauseSeconds", "must be 0 (never) or 10 to 86400");
      u.idle_pause_seconds = static_cast<int>(*v);
    }
    u.persistent = f.Bool("persistent");
    if (is_null("maxTotalCostMicros")) u.max_total_cost_micros = std::optional<int64_t>();
    if (auto v = f.Int("maxTotalCostMicros", 0, contract::kMaxCostMicrosMax))
      u.max_total_cost_micros = *v;
    f.Finish();
    ThrowIfError(ctx.sandboxes.Update(s, u));
    ex.SendJson(200, SandboxJson(*s));
  });

  r.Add("POST", "/v1/sandboxes/{id}:pause", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    FieldReader(ex.JsonBody()).Finish();
    ex.activity.reset();  // a pause is not activity that keeps it awake
    ThrowIfError(ctx.sandboxes.Pause(s, "requested"));
    ex.SendJson(200, SandboxJson(*s));
  });

  r.Add("POST", "/v1/sandboxes/{id}:wake", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    std::optional<int> timeout;
    if (f.has("timeoutSeconds"))
      timeout = static_cast<int>(f.Int("timeoutSeconds", contract::kTimeoutSeconds));
    f.Finish();
    // Waits for room like a create (Prefer: wait), at least a minute.
    auto deadline = std::max(PreferWaitDeadline(ex),
                             std::chrono::steady_clock::now() + std::chrono::seconds(60));
    ThrowIfError(ctx.launcher.Wake(s, timeout, deadline, PayerOf(ex)));
    ex.SendJson(200, SandboxJson(*s));
  });

  r.Add("GET", "/v1/sandboxes", [&ctx](Exchange& ex) {
    control::ListFilter filter;
    for (const auto& name : ex.QueryAll("state")) {
      auto state = control::ParseState(name);
      if (!state)
        throw InvalidField("query.state",
                           "must be starting, running, pausing, paused, resuming, stopping or "
                           "stopped");
      filter.states.push_back(*state);
    }
    filter.name = ex.Query("name");
    for (const auto& l : ex.QueryAll("label")) {
      size_t colon = l.find(':');
      if (colon == std::string::npos || colon == 0)
        throw InvalidField("query.label", "must be key:value");
      filter.labels.emplace_back(l.substr(0, colon), l.substr(colon + 1));
    }
    filter.include_stopped = ex.Query("includeStopped").value_or("") == "true";
    filter.owner = OwnerScope(ex);
    int limit = static_cast<int>(QueryInt(ex, "limit", 1, 500, 100));
    size_t start = 0;
    if (auto c = ex.Query("cursor")) {
      try {
        start = std::stoul(*c);
      } catch (...) {
        throw InvalidField("query.cursor", "is not a cursor from a previous answer");
      }
    }
    auto all = ctx.sandboxes.List(filter);
    json data = json::array();
    for (size_t i = start; i < all.size() && data.size() < static_cast<size_t>(limit); ++i)
      data.push_back(SandboxJson(*all[i]));
    size_t next = start + data.size();
    ex.SendJson(
        200, json{{"data", data},
                  {"nextCursor", next < all.size() ? json(std::to_string(next)) : json(nullptr)}});
  });

  r.Add("GET", "/v1/sandboxes/{id}",
        [&ctx](Exchange& ex) { ex.SendJson(200, SandboxJson(*FindSandbox(ctx, ex))); });

  r.Add("POST", "/v1/sandboxes/{id}:stop", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    FieldReader(ex.JsonBody()).Finish();
    ctx.sandboxes.Stop(s, "requested");
    ex.SendJson(200, SandboxJson(*s));
  });

  r.Add("DELETE", "/v1/sandboxes/{id}", [&ctx](Exchange& ex) {
    auto deleted = ctx.sandboxes.Delete(ex.params["id"], OwnerScope(ex));
    if (!deleted) throw NotFound("sandbox " + ex.params["id"]);
    ex.SendJson(200, DeletedSandboxJson(*deleted));
  });
}

}  // namespace kiln::api
