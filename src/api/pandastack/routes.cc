// PandaStack's sandbox routes under /pandastack/v1 (see api/pandastack/pandastack.h):
// create, get, list, kill, hibernate/pause, wake/resume, lifecycle, and the
// refusals. Exec and files: routes_pandastack_io.cc; snapshots, forks and
// templates: routes_pandastack_copies.cc.
#include "api/pandastack/routes.h"
#include "api/auth.h"
#include "api/errors.h"
#include "api/front.h"
#include "api/pandastack/pandastack.h"
#include "api/validate.h"
#include "common/metrics.h"
#include "common/time.h"
#include "images/manager/image_manager.h"

namespace kiln::api::pandastack {

using nlohmann::json;

std::string TemplateName(ApiContext& ctx, const std::optional<std::string>& image,
                         const std::string& owner) {
  if (!image || !ctx.images) return "base";
  auto rec = ctx.images->Get(*image, owner);
  return rec.ok() ? rec->name : *image;
}

json Present(ApiContext& ctx, const control::Sandbox& s) {
  control::SandboxRecord r = s.Record();
  SandboxExtras extras{TemplateName(ctx, r.spec.image, r.spec.owner), std::nullopt};
  // Only a snapshot of the key's own counts: an image's warm copy or a
  // fork's own capture is how kiln started it, not what the caller chose.
  if (r.spec.snapshot) {
    if (auto snap = ctx.sandboxes.snapshots().FindVisible(*r.spec.snapshot, std::nullopt,
                                                          control::SnapshotUse::kOrigin))
      extras.from_snapshot = snap->id;
  }
  return SandboxJson(r, extras);
}

control::Deadline CreateDeadline(const Exchange& ex) {
  // Wait a little for room (well inside the client's 30 s timeout); past
  // that the 503 + Retry-After hands the retry to the client.
  return RoomDeadline(ex, kRoomWait);
}

namespace {

void Create(ApiContext& ctx, Exchange& ex) {
  CreateRequest parsed = ReadCreate(ex.JsonBody(), ctx.sandboxes.lease_seconds());
  launch::LaunchRequest req = LaunchFor(ex, std::move(parsed.spec), kRoomWait);
  if (!req.spec.snapshot) {
    req.image = parsed.template_name;
    // PandaStack's own default template, which kiln lacks, is kiln's
    // built-in image unless the key made an image of that name.
    if (parsed.template_name == kClientDefaultTemplate) req.image_fallback = "base";
  }
  launch::Launched launched = ValueOrThrow(ctx.launcher.Launch(std::move(req)));
  ex.SendJson(200, Present(ctx, *launched.sandbox));
}

// Sets the TTL to `seconds` from now by lengthening the lease; kiln leases
// never shorten, so a smaller TTL is refused rather than ignored.
void SetTtl(ApiContext& ctx, Exchange& ex, const std::shared_ptr<control::Sandbox>& s,
            int64_t seconds) {
  ThrowIfError(s->RequireRunning());
  int64_t left_s = (s->expires_ms() - StableNowMs() + 999) / 1000;
  if (seconds + 1 < left_s)
    throw InvalidField("body.ttl_seconds", "kiln leases only lengthen: this sandbox has " +
                                               std::to_string(left_s) + " s left");
  if (seconds <= left_s) return;
  ValueOrThrow(ctx.launcher.Extend(s, seconds - left_s, PayerOf(ex)));
}

void Lifecycle(ApiContext& ctx, Exchange& ex) {
  auto s = FindSandbox(ctx, ex);
  LifecycleChange change = ReadLifecycle(ex.JsonBody(), ctx.sandboxes.lease_seconds());
  if (change.persistent && *change.persistent != s->spec().persistent) {
    control::SandboxUpdate update;  // kiln's own :update
    update.persistent = *change.persistent;
    ThrowIfError(ctx.sandboxes.Update(s, update));
  }
  if (change.ttl_seconds) SetTtl(ctx, ex, s, *change.ttl_seconds);
  ex.SendJson(200, LifecycleJson(s->Record(), StableNowMs()));
}

void AddLifecycleRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/pandastack/v1/sandboxes", [&ctx](Exchange& ex) { Create(ctx, ex); });

  r.Add("GET", "/pandastack/v1/sandboxes", [&ctx](Exchange& ex) {
    control::ListFilter filter;
    filter.owner = OwnerScope(ex);
    json items = json::array();
    for (const auto& s : ctx.sandboxes.List(filter)) items.push_back(Present(ctx, *s));
    ex.SendJson(200, json{{"items", items}});
  });

  r.Add("GET", "/pandastack/v1/sandboxes/{id}",
        [&ctx](Exchange& ex) { ex.SendJson(200, Present(ctx, *FindSandbox(ctx, ex))); });

  r.Add("DELETE", "/pandastack/v1/sandboxes/{id}", [&ctx](Exchange& ex) {
    auto deleted = ctx.sandboxes.Delete(ex.params["id"], OwnerScope(ex));
    if (!deleted) throw NotFound("sandbox " + ex.params["id"]);
    ex.SendJson(200, json{{"id", deleted->record.id}, {"status", "deleted"}});
  });

  // PandaStack's hibernate and pause are one thing in kiln: a checkpoint on
  // disk that frees memory and CPU; any later call wakes it (autoWake).
  Handler pause = [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    FieldReader(ex.JsonBody()).Finish();
    ex.activity.reset();  // a pause is not activity that keeps it awake
    ThrowIfError(ctx.sandboxes.Pause(s, "requested"));
    ex.SendJson(200, Present(ctx, *s));
  };
  r.Add("POST", "/pandastack/v1/sandboxes/{id}/hibernate", pause);
  r.Add("POST", "/pandastack/v1/sandboxes/{id}/pause", pause);
  Handler wake = [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    FieldReader(ex.JsonBody()).Finish();
    // PandaStack's wake of a running sandbox does nothing, and says so.
    if (s->state() != control::SandboxState::kRunning) {
      ThrowIfError(ctx.launcher.Wake(s, std::nullopt, CreateDeadline(ex), PayerOf(ex)));
    }
    ex.SendJson(200, Present(ctx, *s));
  };
  r.Add("POST", "/pandastack/v1/sandboxes/{id}/wake", wake);
  r.Add("POST", "/pandastack/v1/sandboxes/{id}/resume", wake);

  r.Add("GET", "/pandastack/v1/sandboxes/{id}/lifecycle", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    ex.SendJson(200, LifecycleJson(s->Record(), StableNowMs()));
  });
  r.Add("PATCH", "/pandastack/v1/sandboxes/{id}/lifecycle",
        [&ctx](Exchange& ex) { Lifecycle(ctx, ex); });

  // preview_urls: the ports shared with kiln's previews (POST
  // /v1/sandboxes/{id}/previews), each at its URL.
  r.Add("GET", "/pandastack/v1/sandboxes/{id}/ports", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json ports = json::array();
    if (ctx.previews) {
      for (const auto& p : ctx.previews->List(s->id()))
        ports.push_back({{"port", p.port},
                         {"url", PreviewUrl(ctx.ports, s->id(), p.port)},
                         {"visibility", p.is_public ? "public" : "private"}});
    }
    ex.SendJson(200, json{{"ports", ports}});
  });
}

// Whatever else is asked under the prefix: refused in PandaStack's shape
// (PandaStackDialect), naming the feature. The router has no wildcard, so
// every depth the client's paths reach is registered, after the served
// routes (a route matches in registration order).
void AddRefusals(Router& r) {
  Handler refuse = [](Exchange& ex) { throw ApiError(Unsupported(ex.method(), ex.path())); };
  r.Add("GET", "/pandastack/v1/{a}", refuse);
  r.Add("POST", "/pandastack/v1/{a}", refuse);
  r.Add("PUT", "/pandastack/v1/{a}", refuse);
  r.Add("PATCH", "/pandastack/v1/{a}", refuse);
  r.Add("DELETE", "/pandastack/v1/{a}", refuse);
  r.Add("GET", "/pandastack/v1/{a}/{b}", refuse);
  r.Add("POST", "/pandastack/v1/{a}/{b}", refuse);
  r.Add("PUT", "/pandastack/v1/{a}/{b}", refuse);
  r.Add("PATCH", "/pandastack/v1/{a}/{b}", refuse);
  r.Add("DELETE", "/pandastack/v1/{a}/{b}", refuse);
  r.Add("GET", "/pandastack/v1/{a}/{b}/{c}", refuse);
  r.Add("POST", "/pandastack/v1/{a}/{b}/{c}", refuse);
  r.Add("PUT", "/pandastack/v1/{a}/{b}/{c}", refuse);
  r.Add("PATCH", "/pandastack/v1/{a}/{b}/{c}", refuse);
  r.Add("DELETE", "/pandastack/v1/{a}/{b}/{c}", refuse);
  r.Add("GET", "/pandastack/v1/{a}/{b}/{c}/{d}", refuse);
  r.Add("POST", "/pandastack/v1/{a}/{b}/{c}/{d}", refuse);
  r.Add("PUT", "/pandastack/v1/{a}/{b}/{c}/{d}", refuse);
  r.Add("PATCH", "/pandastack/v1/{a}/{b}/{c}/{d}", refuse);
  r.Add("DELETE", "/pandastack/v1/{a}/{b}/{c}/{d}", refuse);
}

}  // namespace
}  // namespace kiln::api::pandastack

namespace kiln::api {

void AddPandaStackRoutes(Router& r, ApiContext& ctx) {
  pandastack::AddLifecycleRoutes(r, ctx);
  pandastack::AddIoRoutes(r, ctx);
  pandastack::AddCopyRoutes(r, ctx);
  pandastack::AddRefusals(r);
}

}  // namespace kiln::api
