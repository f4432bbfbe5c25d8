// E2B's control plane under /e2b (see e2b.h): create, list, get, kill,
// timeout, refreshes, pause, resume, connect and fork of sandboxes, over
// kiln's launch::Launcher and SandboxManager. Templates and snapshots:
// routes_templates.cc; the refusals are registered last.
#include <algorithm>
#include <cmath>

#include "api/auth.h"
#include "api/e2b/e2b.h"
#include "api/e2b/routes.h"
#include "api/e2b/templates.h"
#include "api/errors.h"
#include "api/validate.h"
#include "common/contract.h"
#include "common/time.h"
#include "images/manager/image_manager.h"
#include "images/manager/pulled_images.h"
#include "images/parse/image_ref.h"

namespace kiln::api::e2b {

using nlohmann::json;

std::string TemplateIdOf(ApiContext& ctx, const control::SandboxRecord& r) {
  // A sandbox started from a snapshot of the key's shows the snapshot, as
  // E2B's do (its snapshots are templates); an image's warm copy or a
  // fork's own capture is how kiln started it, not what the caller chose.
  if (r.spec.snapshot) {
    if (auto snap = ctx.sandboxes.snapshots().FindVisible(*r.spec.snapshot, std::nullopt,
                                                          control::SnapshotUse::kOrigin))
      return snap->id;
  }
  if (!r.spec.image || !ctx.images) return kBaseTemplate;
  if (auto own = ctx.images->Get(*r.spec.image, r.spec.owner); own.ok()) return own->name;
  // An operator's image that every key boots by name (code-interpreter-v1).
  if (auto shared = ctx.images->Get(*r.spec.image, std::nullopt); shared.ok()) {
    for (const store::ApiKey& key : ctx.keys.Operators())
      if (key.id == shared->owner) return shared->name;
  }
  return *r.spec.image;
}

SandboxExtras ExtrasOf(ApiContext& ctx, const control::SandboxRecord& r) {
  return SandboxExtras{TemplateIdOf(ctx, r), EnvdAccessToken(ctx, r.id),
                       TrafficAccessToken(ctx, r.id), StableNowMs()};
}

control::Deadline CreateDeadline(const Exchange& ex) { return RoomDeadline(ex, kRoomWait); }

namespace sandbox_routes {
namespace {

// A sandbox E2B's clients may see: the caller's, not stopped (E2B's killed
// sandboxes are gone); 404 otherwise.
std::shared_ptr<control::Sandbox> FindLive(ApiContext& ctx, Exchange& ex) {
  auto s = FindSandbox(ctx, ex);
  if (!E2bStateName(s->state()))
    throw ApiError(Code::kNotFound, "sandbox " + s->id() + " was not found");
  return s;
}

// Sets the lease to end `seconds` from now. E2B's set_timeout may shorten
// it (kiln's lease then ends sooner); a connect or refresh only lengthens.
void SetLease(ApiContext& ctx, Exchange& ex, const std::shared_ptr<control::Sandbox>& s,
              int seconds, bool may_shorten) {
  ThrowIfError(s->RequireRunning());
  int64_t left_ms = s->expires_ms() - StableNowMs();
  auto delta_s = static_cast<int64_t>(std::llround((seconds * 1000.0 - left_ms) / 1000.0));
  if (delta_s == 0 || (delta_s < 0 && !may_shorten)) return;
  ValueOrThrow(ctx.launcher.Extend(s, delta_s, PayerOf(ex)));
}

// slime's image routing (--e2b-image-metadata-key KEY): a create whose
// template is base (the SDKs' default, so slime's, which names none) and
// whose metadata has KEY boots the image KEY's value names: the caller's
// kiln image of that name, else an OCI reference, pulled once as the
// caller's own image (the create waits for the pull as it waits for room).
// False when the create is not one.
bool LaunchMetadataImage(ApiContext& ctx, const std::string& template_id,
                         launch::LaunchRequest& req) {
  const std::string& key = ctx.e2b_image_metadata_key;
  auto named = key.empty() ? req.spec.labels.end() : req.spec.labels.find(key);
  if (named == req.spec.labels.end() || template_id != kBaseTemplate) return false;
  const std::string& value = named->second;
  if (ctx.images && ctx.images->Resolve(value, req.scope).ok()) {
    req.image = value;
    return true;
  }
  auto ref = images::ParseImageRef(value);
  if (!ref.ok())
    throw InvalidField("metadata." + key,
                       "names neither a kiln image of yours nor an OCI image reference: " +
                           ref.status().message());
  if (!ctx.pulled_images)
    throw ApiError(Code::kNotSupported, "this kilnd pulls no images for creates",
                   json{{"feature", "image references in metadata"}});
  req.image =
      ValueOrThrow(ctx.pulled_images->Ensure(*ref, req.spec.owner, req.deadline, req.cancelled));
  return true;
}

// Launches what `req` names and answers E2B's create.
void LaunchAndAnswer(ApiContext& ctx, Exchange& ex, const CreateRequest& parsed,
                     launch::LaunchRequest req) {
  auto launched = ctx.launcher.Launch(std::move(req));
  if (!launched.ok() && launched.status().code() == Code::kImageNotFound) {
    std::string how =
        parsed.template_id == kInterpreterTemplate
            ? " kilnd builds the code interpreter's template on first need under the "
              "operator's key, and this kilnd has no live admin key to build it under."
            : " Templates are kiln images: `base`, one built with the e2b SDK's "
              "Template.build, or with kiln's POST /v1/images.";
    throw ApiError(Code::kImageNotFound,
                   "template '" + parsed.template_id + "' was not found." + how,
                   json{{"templateID", parsed.template_id}});
  }
  auto s = ValueOrThrow(std::move(launched)).sandbox;
  if (parsed.timeout_seconds < s->spec().timeout_seconds) {
    try {
      SetLease(ctx, ex, s, parsed.timeout_seconds, true);
    } catch (const ApiError&) {
      ctx.sandboxes.Delete(s->id());
      throw;
    }
  }
  ex.SendJson(201, CreatedJson(s->Record(), ExtrasOf(ctx, s->Record())));
}

void Create(ApiContext& ctx, Exchange& ex) {
  CreateRequest parsed = ReadCreate(ex.JsonBody(), ctx.sandboxes.lease_seconds());
  launch::LaunchRequest req = LaunchFor(ex, std::move(parsed.spec), kRoomWait);
  if (!LaunchMetadataImage(ctx, parsed.template_id, req)) {
    // E2B's snapshots are templates: a snapshot of the key's by id starts a copy.
    if (auto snap = ctx.sandboxes.snapshots().FindVisible(parsed.template_id, req.scope,
                                                          control::SnapshotUse::kTaken))
      req.spec.snapshot = snap->id;
    else
      req.image = parsed.template_id;
    // The interpreter's template may be the operator's, shared by every key.
    if (req.image && parsed.template_id == kInterpreterTemplate)
      LaunchFrontImage(ctx, ex, parsed.template_id, req);
  }
  LaunchAndAnswer(ctx, ex, parsed, std::move(req));
}

// Resumes a paused sandbox (connect, resume), its lease `timeout` seconds
// or what it had.
void Resume(ApiContext& ctx, Exchange& ex, const std::shared_ptr<control::Sandbox>& s,
            const ConnectRequest& c) {
  std::optional<int> lease;
  if (c.timeout_seconds)
    lease = std::max<int>(*c.timeout_seconds, static_cast<int>(contract::kTimeoutSeconds.min));
  ThrowIfError(ctx.launcher.Wake(s, lease, CreateDeadline(ex), PayerOf(ex)));
  if (c.timeout_seconds && *c.timeout_seconds < *lease)
    SetLease(ctx, ex, s, *c.timeout_seconds, true);
}

void Connect(ApiContext& ctx, Exchange& ex, bool resume_only) {
  auto s = FindLive(ctx, ex);
  ConnectRequest c = ReadConnect(ex.JsonBody(), ctx.sandboxes.lease_seconds());
  // What the lease's end does was chosen at create (autoPause).
  if (c.auto_pause && *c.auto_pause != s->spec().pause_on_lease_end)
    throw ApiError(Code::kNotSupported,
                   "changing autoPause on resume is not offered by kiln: it is set at create",
                   json{{"feature", "autoPause on resume"}});
  control::SandboxState st = s->state();
  bool paused = st == control::SandboxState::kPaused || st == control::SandboxState::kPausing;
  // A files-only pause boots afresh anyway; a memory checkpoint is only
  // ever restored (its files are inside its memory image).
  if (c.reboot && paused) {
    auto checkpoint = ctx.sandboxes.snapshots().Find(s->Record().checkpoint);
    if (checkpoint && checkpoint->mode == store::SnapshotMode::kMemory)
      throw ApiError(Code::kNotSupported,
                     "a reboot (on_resume \"reboot\") of a sandbox paused with its memory is not "
                     "offered by kiln: its files are inside the memory checkpoint; pause with "
                     "mode \"filesystem\" to boot afresh on resume",
                     json{{"feature", "on_resume reboot of a memory pause"}});
  }
  if (resume_only && !paused)
    throw ApiError(Code::kNotPaused, "sandbox " + s->id() + " is already running");
  int status = 200;
  if (paused || st == control::SandboxState::kResuming) {
    Resume(ctx, ex, s, c);
    status = 201;
  } else if (c.timeout_seconds) {
    // E2B's connect lengthens a running sandbox's timeout, never shortens it.
    SetLease(ctx, ex, s, *c.timeout_seconds, false);
  }
  ex.SendJson(status, CreatedJson(s->Record(), ExtrasOf(ctx, s->Record())));
}

void List(ApiContext& ctx, Exchange& ex, bool paged) {
  ListQuery q = ReadListQuery([&ex](const std::string& name) { return ex.Query(name); });
  if (!paged) {
    // E2B's first list answers running ones unless a state is asked for.
    if (!ex.Query("state")) q.paused = false;
    q.limit = std::numeric_limits<int>::max();
  }
  control::ListFilter filter;
  filter.owner = OwnerScope(ex);
  filter.labels = q.metadata;
  std::vector<control::SandboxRecord> found;
  for (const auto& s : ctx.sandboxes.List(filter)) {
    control::SandboxRecord r = s->Record();
    auto state = E2bStateName(r.state);
    if (!state || (*state == "running" && !q.running) || (*state == "paused" && !q.paused))
      continue;
    if (q.started_after_ms && r.created_ms < *q.started_after_ms) continue;
    found.push_back(std::move(r));
  }
  std::sort(found.begin(), found.end(), [&q](const auto& a, const auto& b) {
    if (a.created_ms != b.created_ms)
      return q.descending ? a.created_ms > b.created_ms : a.created_ms < b.created_ms;
    return a.id < b.id;
  });
  json items = json::array();
  size_t skipped = 0, next = 0;
  for (const auto& r : found) {
    SandboxExtras x = ExtrasOf(ctx, r);
    if (q.template_id && x.template_id != *q.template_id) continue;
    if (skipped++ < q.offset) continue;
    if (items.size() >= static_cast<size_t>(q.limit)) {
      next = skipped - 1;
      break;
    }
    items.push_back(ListedJson(r, x));
  }
  if (next > 0) ex.extra_headers.emplace_back("x-next-token", NextToken(next));
  ex.SendJson(200, items);
}

void Fork(ApiContext& ctx, Exchange& ex) {
  auto s = FindLive(ctx, ex);
  ForkRequest req = ReadFork(ex.JsonBody(), ctx.sandboxes.lease_seconds());
  control::ForkOptions opts;
  opts.count = req.count;
  control::ForkResult forked =
      ValueOrThrow(ctx.launcher.Fork(s, opts, CreateDeadline(ex), PayerOf(ex)));
  if (forked.copies.empty()) throw ApiError(forked.status);
  json results = json::array();
  for (const auto& c : forked.copies) {
    if (req.timeout) SetLease(ctx, ex, c, *req.timeout, true);
    results.push_back({{"sandbox", CreatedJson(c->Record(), ExtrasOf(ctx, c->Record()))}});
  }
  // The copies that did not start: one error each, in E2B's shape.
  for (size_t i = forked.copies.size(); i < static_cast<size_t>(opts.count); ++i)
    results.push_back({{"error", ErrorBody(HttpStatus(forked.status), forked.status)}});
  ex.SendJson(201, results);
}

void SendNoContent(Exchange& ex) { ex.SendBytes(204, "", "application/json"); }

void AddSandboxRoutes(Router& r, ApiContext& ctx) {
  Handler create = [&ctx](Exchange& ex) { Create(ctx, ex); };
  r.Add("POST", "/e2b/sandboxes", create);
  r.Add("POST", "/e2b/v2/sandboxes", create);
  r.Add("GET", "/e2b/sandboxes", [&ctx](Exchange& ex) { List(ctx, ex, false); });
  r.Add("GET", "/e2b/v2/sandboxes", [&ctx](Exchange& ex) { List(ctx, ex, true); });

  // The meter's readings (every 5 s while it runs); the many-sandbox form
  // gives each one's latest.
  r.Add("GET", "/e2b/sandboxes/metrics", [&ctx](Exchange& ex) {
    json out = json::object();
    auto scope = OwnerScope(ex);
    for (const auto& id : ReadMetricsSandboxIds(ex.Query("sandbox_ids"))) {
      auto s = ctx.sandboxes.Get(id);
      if (!s || (scope && s->spec().owner != *scope)) continue;
      if (auto latest = s->LatestMetrics()) out[id] = SandboxMetricJson(*latest);
    }
    ex.SendJson(200, {{"sandboxes", std::move(out)}});
  });
  r.Add("GET", "/e2b/sandboxes/{id}/metrics", [&ctx](Exchange& ex) {
    auto s = FindLive(ctx, ex);
    MetricsWindow w = ReadMetricsWindow([&ex](const std::string& n) { return ex.Query(n); },
                                        s->Record().created_ms, StableNowMs());
    json out = json::array();
    for (const auto& p : s->Metrics(w.from_ms, w.to_ms, kMetricsSpanMs))
      out.push_back(SandboxMetricJson(p.mean));
    ex.SendJson(200, out);
  });

  r.Add("GET", "/e2b/sandboxes/{id}", [&ctx](Exchange& ex) {
    auto s = FindLive(ctx, ex);
    control::SandboxRecord rec = s->Record();
    ex.SendJson(200, DetailJson(rec, ExtrasOf(ctx, rec)));
  });

  r.Add("DELETE", "/e2b/sandboxes/{id}", [&ctx](Exchange& ex) {
    auto s = FindLive(ctx, ex);
    if (!ctx.sandboxes.Delete(s->id(), OwnerScope(ex)))
      throw ApiError(Code::kNotFound, "sandbox " + s->id() + " was not found");
    SendNoContent(ex);
  });

  r.Add("POST", "/e2b/sandboxes/{id}/timeout", [&ctx](Exchange& ex) {
    auto s = FindLive(ctx, ex);
    SetLease(ctx, ex, s, ReadTimeout(ex.JsonBody(), ctx.sandboxes.lease_seconds()), true);
    SendNoContent(ex);
  });

  r.Add("POST", "/e2b/sandboxes/{id}/refreshes", [&ctx](Exchange& ex) {
    auto s = FindLive(ctx, ex);
    SetLease(ctx, ex, s, ReadRefresh(ex.JsonBody()), false);
    SendNoContent(ex);
  });

  // E2B's pause is kiln's: a checkpoint on disk, memory kept, that frees
  // the sandbox's memory and CPU until a connect or resume restores it.
  r.Add("POST", "/e2b/sandboxes/{id}/pause", [&ctx](Exchange& ex) {
    auto s = FindLive(ctx, ex);
    std::optional<bool> memory = ReadPause(ex.JsonBody());
    control::SandboxState st = s->state();
    if (st == control::SandboxState::kPaused || st == control::SandboxState::kPausing)
      throw ApiError(Code::kNotRunning, "sandbox " + s->id() + " is already paused");
    ex.activity.reset();  // a pause is not activity that keeps it awake
    ThrowIfError(ctx.sandboxes.Pause(s, "requested", memory));
    SendNoContent(ex);
  });

  // Harbor switches a task's phases between network policies with it.
  r.Add("PUT", "/e2b/sandboxes/{id}/network", [&ctx](Exchange& ex) {
    auto s = FindLive(ctx, ex);
    network::Policy policy = ReadNetworkUpdate(ex.JsonBody());
    ValueOrThrow(ctx.sandboxes.SetNetwork(s, policy));
    SendNoContent(ex);
  });

  r.Add("POST", "/e2b/sandboxes/{id}/resume", [&ctx](Exchange& ex) { Connect(ctx, ex, true); });
  Handler connect = [&ctx](Exchange& ex) { Connect(ctx, ex, false); };
  r.Add("POST", "/e2b/sandboxes/{id}/connect", connect);
  r.Add("POST", "/e2b/v2/sandboxes/{id}/connect", connect);
  r.Add("POST", "/e2b/sandboxes/{id}/fork", [&ctx](Exchange& ex) { Fork(ctx, ex); });
}

// Whatever else is asked under /e2b: 501 naming a feature kiln lacks, else
// 404 (in E2B's shape, as every error here: E2bDialect). Registered after
// every served route.
void AddRefusals(Router& r) {
  r.Add("*", "/e2b/{rest...}",
        [](Exchange& ex) { throw ApiError(Unsupported(ex.method(), ex.path())); });
}

}  // namespace
}  // namespace sandbox_routes
}  // namespace kiln::api::e2b

namespace kiln::api {

void AddE2bRoutes(Router& r, ApiContext& ctx) {
  e2b::sandbox_routes::AddSandboxRoutes(r, ctx);
  e2b::AddTemplateBuildRoutes(r, ctx);  // before the templates' {id} routes
  e2b::AddTemplateRoutes(r, ctx);
  e2b::sandbox_routes::AddRefusals(r);
}

}  // namespace kiln::api
