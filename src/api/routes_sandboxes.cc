// POST/GET /v1/sandboxes, GET /v1/sandboxes/{id}, :stop, DELETE.
#include <regex>

#include "api/auth.h"
#include "api/errors.h"
#include "api/presenters.h"
#include "api/routes.h"
#include "api/validate.h"
#include "common/contract.h"
#include "common/metrics.h"
#include "common/time.h"
#include "images/image_manager.h"

namespace kiln::api {

using nlohmann::json;

namespace {

control::SandboxSpec ReadCreate(const json& body, std::optional<std::string>* image) {
  FieldReader f(body);
  control::SandboxSpec spec;
  spec.shape.vcpu = static_cast<int>(f.Int("vcpu", contract::kVcpu));
  spec.shape.memory_mib = static_cast<int>(f.Int("memoryMiB", contract::kMemoryMiB));
  spec.shape.disk_mib = static_cast<int>(f.Int("diskMiB", contract::kDiskMiB));
  spec.timeout_seconds = static_cast<int>(f.Int("timeoutSeconds", contract::kTimeoutSeconds));
  if (auto v = f.String("onLeaseEnd", 16); v && *v != "stop")
    f.Issue("onLeaseEnd", "must be \"stop\" (kiln sandboxes do not pause)");
  if (auto v = f.Int("maxCostMicros", 0, contract::kMaxCostMicrosMax)) spec.max_cost_micros = *v;
  if (auto v = f.String("name", contract::kSandboxNameMax)) {
    static const std::regex kName("[A-Za-z0-9._-]+");
    if (!std::regex_match(*v, kName))
      f.Issue("name", "may hold only letters, digits, '.', '_' and '-'");
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
  f.Finish();
  return spec;
}

}  // namespace

void AddSandboxRoutes(Router& r, ApiContext& ctx) {
  r.Add("GET", "/v1/health", [&ctx](Exchange& ex) {
    engine::EngineInfo e = ctx.sandboxes.EngineInfo();
    ex.SendJson(200, json{{"ok", true},
                          {"version", KILN_VERSION},
                          {"time", FormatTime(NowMs())},
                          {"engine",
                           {{"name", e.name},
                            {"version", e.version},
                            {"pinnedVersion", e.pinned_version},
                            {"pinned", e.pinned()}}}});
  });

  r.Add("POST", "/v1/sandboxes", [&ctx](Exchange& ex) {
    std::optional<std::string> image;
    control::SandboxSpec spec = ReadCreate(ex.JsonBody(), &image);
    auto deadline = PreferWaitDeadline(ex);
    const Caller& caller = CallerOf(ex);
    spec.owner = caller.key_id;
    if (spec.snapshot) FindSnapshot(ctx, ex, *spec.snapshot);  // another key's is not found
    std::optional<images::ImageLaunch> launch;
    if (image) {
      if (!ctx.images) throw ApiError(Code::kImageNotFound, "this kilnd serves no images");
      launch = ValueOrThrow(ctx.images->ForSandbox(*image, OwnerScope(ex), spec.shape));
      spec.image = launch->image_id;
      spec.rootfs = launch->rootfs;
      spec.run_as = launch->run_as;
      // A default-size sandbox of a ready image is a restore of its warm copy.
      spec.snapshot = launch->warm_snapshot;
    }
    if (caller.daily_limit_micros) {
      double spent = ctx.sandboxes.SpentMicrosSince(caller.key_id, StableNowMs() - 86400000);
      if (spent >= static_cast<double>(*caller.daily_limit_micros))
        throw ApiError(Code::kSpendingLimitReached,
                       "this key spent " + std::to_string(static_cast<int64_t>(spent)) +
                           " of its daily limit of " + std::to_string(*caller.daily_limit_micros) +
                           " micro-dollars in the last 24 hours");
    }
    const char* op = spec.snapshot ? "restore" : "create";
    int64_t t0 = MonotonicNowMs();
    auto s = ValueOrThrow(
        ctx.sandboxes.Create(std::move(spec), deadline, [&ex] { return ex.ClientGone(); }));
    metrics::ObserveOperation(op, static_cast<double>(MonotonicNowMs() - t0) / 1000.0);
    json answer = SandboxJson(*s);
    if (launch && launch->start) {
      if (launch->warm_snapshot) {
        // The warm copy's start command is running: it was ready when the
        // copy was taken, and is ready now that the copy is restored.
        answer["start"] = {{"state", launch->warm_start.value("state", std::string("ready"))},
                           {"processId", launch->warm_start.value("processId", json(nullptr))},
                           {"readyMs", MonotonicNowMs() - t0}};
      } else {
        answer["start"] = ctx.images->StartIn(s, *launch->start);
      }
    }
    ex.SendJson(200, answer);
  });

  r.Add("POST", "/v1/sandboxes/{id}:extend", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    auto seconds = f.Int("seconds", contract::kExtendSeconds.min, contract::kExtendSeconds.max);
    if (!seconds && !f.has("seconds")) f.Issue("seconds", "is required");
    f.Finish();
    ValueOrThrow(ctx.sandboxes.Extend(s, *seconds));
    ex.SendJson(200, SandboxJson(*s));
  });

  r.Add("GET", "/v1/sandboxes", [&ctx](Exchange& ex) {
    control::ListFilter filter;
    for (const auto& name : ex.QueryAll("state")) {
      auto state = control::ParseState(name);
      if (!state)
        throw InvalidField("query.state", "must be starting, running, stopping or stopped");
      filter.states.push_back(*state);
    }
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
