// POST/GET /v1/sandboxes, GET /v1/sandboxes/{id} and its metrics, :stop, DELETE.
#include "api/auth.h"
#include "api/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/requests.h"
#include "api/kiln/routes.h"
#include "common/time.h"

namespace kiln::api::v1 {

using nlohmann::json;

void AddSandboxRoutes(Router& r, ApiContext& ctx) {
  r.Add("GET", "/v1/health", [&ctx](Exchange& ex) {
    ex.SendJson(200,
                HealthJson(ctx.sandboxes.EngineInfo(), ctx.sandboxes.snapshots().pool_options()));
  });

  r.Add("POST", "/v1/sandboxes", [&ctx](Exchange& ex) {
    CreateRequest create = ReadCreate(ex.JsonBody(), ctx.sandboxes.lease_seconds());
    int64_t floor = ctx.sandboxes.prices().cpu_floor_millis;
    if (create.cpu_floor_millis && *create.cpu_floor_millis != floor)
      throw InvalidField("body.cpuFloorMillis", "is this kilnd's price, " + std::to_string(floor) +
                                                    " (set by kilnd --prices)");
    launch::LaunchRequest req = LaunchFor(ex, std::move(create.spec));
    req.image = create.image;
    req.get_or_create = create.get_or_create;
    launch::Launched launched = ValueOrThrow(ctx.launcher.Launch(std::move(req)));
    if (launched.in_use) ex.activity = launched.in_use;
    ex.SendJson(200, LaunchedJson(launched));
  });

  r.Add("POST", "/v1/sandboxes/{id}:extend", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    int seconds = ReadExtend(ex.JsonBody());
    ValueOrThrow(ctx.launcher.Extend(s, seconds, PayerOf(ex)));
    ex.SendJson(200, SandboxJson(*s));
  });

  r.Add("POST", "/v1/sandboxes/{id}:update", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    control::SandboxUpdate u = ReadUpdate(ex.JsonBody());
    ThrowIfError(ctx.sandboxes.Update(s, u));
    ex.SendJson(200, SandboxJson(*s));
  });

  r.Add("POST", "/v1/sandboxes/{id}:pause", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::optional<bool> memory = ReadPauseMemory(ex.JsonBody());
    ex.activity.reset();  // a pause is not activity that keeps it awake
    ThrowIfError(ctx.sandboxes.Pause(s, "requested", memory));
    ex.SendJson(200, SandboxJson(*s));
  });

  r.Add("POST", "/v1/sandboxes/{id}:wake", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::optional<int> timeout = ReadWake(ex.JsonBody(), ctx.sandboxes.lease_seconds());
    // Waits for room like a create (Prefer: wait), at least a minute.
    auto deadline = std::max(PreferWaitDeadline(ex),
                             std::chrono::steady_clock::now() + std::chrono::seconds(60));
    ThrowIfError(ctx.launcher.Wake(s, timeout, deadline, PayerOf(ex)));
    ex.SendJson(200, SandboxJson(*s));
  });

  r.Add("GET", "/v1/sandboxes", [&ctx](Exchange& ex) {
    SandboxListQuery q = ReadSandboxList(ex);
    q.filter.owner = OwnerScope(ex);
    auto all = ctx.sandboxes.List(q.filter);
    json data = json::array();
    for (size_t i = q.start; i < all.size() && data.size() < static_cast<size_t>(q.limit); ++i)
      data.push_back(SandboxJson(*all[i]));
    size_t next = q.start + data.size();
    ex.SendJson(200,
                PageJson(std::move(data),
                         next < all.size() ? std::optional(std::to_string(next)) : std::nullopt));
  });

  r.Add("GET", "/v1/sandboxes/{id}",
        [&ctx](Exchange& ex) { ex.SendJson(200, SandboxJson(*FindSandbox(ctx, ex))); });

  r.Add("GET", "/v1/sandboxes/{id}/metrics", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    MetricsRange range = ReadMetricsRange(ex);
    int64_t now = StableNowMs();
    ex.SendJson(200, SandboxMetricsJson(s->LatestMetrics(),
                                        s->Metrics(now - range.back_ms, now, range.span_ms)));
  });

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

}  // namespace kiln::api::v1
