// Daytona's control plane under /daytona (see daytona.h): sandboxes'
// create, get, list, stop (kiln's pause), start (wake), delete, labels and
// network settings. The toolbox: routes_toolbox.cc, routes_sessions.cc,
// routes_files.cc.
#include "api/daytona/daytona.h"
#include "api/errors.h"
#include "api/validate.h"
#include "common/time.h"
#include "control/previews.h"
#include "images/manager/built_images.h"
#include "images/manager/image_manager.h"
#include "images/manager/pulled_images.h"
#include "images/parse/image_ref.h"

namespace kiln::api::daytona {

using nlohmann::json;

std::string ToolboxUrl(const Exchange& ex) {
  // The Host the SDK reached kilnd by: the toolbox is on the same listener.
  std::string host = ex.Header("Host");
  if (host.empty()) host = "127.0.0.1:7070";
  return "http://" + host + kToolboxPrefix;
}

namespace {

// The snapshot a sandbox boots, in Daytona's words: its image's name.
std::string SnapshotName(ApiContext& ctx, const control::SandboxSpec& spec) {
  if (!spec.image || !ctx.images) return "base";
  auto rec = ctx.images->Get(*spec.image, spec.owner);
  if (!rec.ok()) rec = ctx.images->Get(*spec.image, std::nullopt);
  return rec.ok() ? rec->name : *spec.image;
}

// The sandbox {id} names: an id, else a name of the caller's (Daytona
// addresses both ways). Another key's is answered as missing.
std::shared_ptr<control::Sandbox> FindDaytona(ApiContext& ctx, Exchange& ex) {
  const std::string& ref = ex.params["id"];
  auto scope = OwnerScope(ex);
  auto s = ctx.sandboxes.Get(ref);
  if (!s && scope) s = ctx.sandboxes.FindByName(*scope, ref);
  if (!s || (scope && s->spec().owner != *scope)) throw NotFound("sandbox " + ref);
  ex.activity = control::Sandbox::Use(s, StableNowMs());
  return s;
}

// "FROM ref" and nothing else: Image.base(ref), or a create from an image
// name; the reference, else nullopt.
std::optional<std::string> OnlyFrom(const std::string& dockerfile) {
  std::string text = dockerfile;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r'))
    text.pop_back();
  if (!text.starts_with("FROM ") || text.find('\n') != std::string::npos) return std::nullopt;
  std::string ref = text.substr(5);
  ref.erase(0, ref.find_first_not_of(' '));
  if (ref.empty() || ref.find(' ') != std::string::npos) return std::nullopt;
  return ref;
}

// How long a create waits for its image's pull or build: Daytona's create
// of an image waits for the build (Harbor's allows ten minutes). A client
// that gives up sooner hangs up, which ends the wait; the build goes on,
// and a later create boots what it made.
constexpr std::chrono::minutes kImageWait{20};
// A preview link's token lives a day, as kiln's own previews' by default.
constexpr int64_t kPreviewTtlMs = 24LL * 3600 * 1000;

// Names what `req` boots: a kiln image the caller reaches by that name,
// else an OCI reference pulled once as the caller's own image.
void BootReference(ApiContext& ctx, const std::string& ref, launch::LaunchRequest& req,
                   const std::string& field) {
  if (ctx.images && ctx.images->Resolve(ref, req.scope).ok()) {
    req.image = ref;
    return;
  }
  auto parsed = images::ParseImageRef(ref);
  if (!parsed.ok()) throw InvalidField(field, "names no image of this key's: " + ref);
  if (!ctx.pulled_images)
    throw ApiError(Unsupported("image references", "this kilnd pulls no images"));
  req.image = ValueOrThrow(ctx.pulled_images->Ensure(
      *parsed, req.spec.owner, std::chrono::steady_clock::now() + kImageWait, req.cancelled));
}

void Create(ApiContext& ctx, Exchange& ex) {
  CreateRequest parsed = ReadCreate(ex.JsonBody(), ctx.sandboxes.lease_seconds());
  auto wait = parsed.queue_timeout_seconds ? std::chrono::seconds(*parsed.queue_timeout_seconds)
                                           : kRoomWait;
  launch::LaunchRequest req = LaunchFor(ex, std::move(parsed.spec), wait);
  if (parsed.snapshot) {
    BootReference(ctx, *parsed.snapshot, req, "body.snapshot");
  } else if (parsed.dockerfile) {
    if (!parsed.context_hashes.empty())
      throw ApiError(Unsupported("build contexts (COPY of local files)",
                                 "kiln's Daytona front has no object storage yet; build the "
                                 "image with POST /v1/images and name it as the snapshot"));
    if (auto ref = OnlyFrom(*parsed.dockerfile)) {
      BootReference(ctx, *ref, req, "body.buildInfo.dockerfileContent");
    } else {
      if (!ctx.built_images)
        throw ApiError(Unsupported("Dockerfile builds", "this kilnd builds no images"));
      req.image = ValueOrThrow(
          ctx.built_images->Ensure(*parsed.dockerfile, std::nullopt, req.spec.owner,
                                   std::chrono::steady_clock::now() + kImageWait, req.cancelled));
    }
  }                                       // else Daytona's default snapshot: kiln's base image
  req.deadline = RoomDeadline(ex, wait);  // room is waited for after the image
  launch::Launched launched = ValueOrThrow(ctx.launcher.Launch(std::move(req)));
  ex.SendJson(200, Present(ctx, ex, *launched.sandbox));
}

void List(ApiContext& ctx, Exchange& ex) {
  control::ListFilter filter;
  filter.owner = OwnerScope(ex);
  // Paused ones too: they are Daytona's stopped sandboxes.
  filter.states = {control::SandboxState::kStarting, control::SandboxState::kRunning,
                   control::SandboxState::kPausing, control::SandboxState::kPaused,
                   control::SandboxState::kResuming};
  if (auto labels = ex.Query("labels"); labels && !labels->empty()) {
    json parsed = json::parse(*labels, nullptr, false);
    if (!parsed.is_object())
      throw InvalidField("query.labels", "must be a JSON object of label values");
    for (const auto& [k, v] : parsed.items()) {
      if (!v.is_string()) throw InvalidField("query.labels." + k, "must be a string");
      filter.labels.emplace_back(k, v.get<std::string>());
    }
  }
  if (auto name = ex.Query("name"); name && !name->empty()) filter.name = *name;
  std::optional<std::string> id = ex.Query("id");
  int64_t limit = QueryInt(ex, "limit", 1, 1000, 1000);
  json items = json::array();
  for (const auto& s : ctx.sandboxes.List(filter)) {
    if (id && !id->empty() && s->id() != *id) continue;
    if (static_cast<int64_t>(items.size()) >= limit) break;
    items.push_back(Present(ctx, ex, *s));
  }
  ex.SendJson(200, json{{"items", items}, {"nextCursor", nullptr}});
}

// Daytona's stop keeps the sandbox to start again: kiln's pause (memory
// and processes kept, so a start resumes where it was).
void Stop(ApiContext& ctx, Exchange& ex) {
  auto s = FindDaytona(ctx, ex);
  control::SandboxState st = s->state();
  if (st != control::SandboxState::kPaused && st != control::SandboxState::kPausing)
    ThrowIfError(ctx.sandboxes.Pause(s, "requested"));
  ex.SendJson(200, Present(ctx, ex, *s));
}

void Start(ApiContext& ctx, Exchange& ex) {
  auto s = FindDaytona(ctx, ex);
  control::SandboxState st = s->state();
  if (st == control::SandboxState::kPaused || st == control::SandboxState::kPausing)
    ThrowIfError(ctx.launcher.Wake(s, std::nullopt, RoomDeadline(ex, kRoomWait), PayerOf(ex)));
  else
    ThrowIfError(s->RequireRunning());
  ex.SendJson(200, Present(ctx, ex, *s));
}

void Delete(ApiContext& ctx, Exchange& ex) {
  auto s = FindDaytona(ctx, ex);
  json answer = Present(ctx, ex, *s);
  if (!ctx.sandboxes.Delete(s->id(), OwnerScope(ex))) throw NotFound("sandbox " + s->id());
  answer["state"] = "destroyed";
  ex.SendJson(200, answer);
}

void SetLabels(ApiContext& ctx, Exchange& ex) {
  auto s = FindDaytona(ctx, ex);
  json body = ex.JsonBody();  // FieldReader keeps a reference
  FieldReader f(body);
  auto labels =
      f.StringMap("labels", contract::kLabelsMax, contract::kLabelKeyMax, contract::kLabelValueMax);
  if (!labels) f.Issue("labels", "is required: the sandbox's labels");
  f.Finish();
  control::SandboxUpdate update;
  update.labels = *labels;
  ThrowIfError(ctx.sandboxes.Update(s, update));
  ex.SendJson(200, json{{"labels", *labels}});
}

// Daytona's preview link: kiln's preview of the port (shared privately
// for a day when it was not shared yet; an existing one kept as it is)
// and a token, which the visitor sends as X-Daytona-Preview-Token.
void PreviewLink(ApiContext& ctx, Exchange& ex) {
  auto s = FindDaytona(ctx, ex);
  const std::string& text = ex.params["port"];
  int port = 0;
  for (char c : text) port = (c >= '0' && c <= '9' && port < 100000) ? port * 10 + (c - '0') : -1;
  if (text.empty() || port < 1 || port > 65535)
    throw InvalidField("path.port", "must be a port, 1 to 65535");
  if (!ctx.previews) throw ApiError(Unsupported("previews", "this kilnd serves no previews"));
  ThrowIfError(s->RequireRunning());
  auto p = ctx.previews->Find(s->id(), port);
  if (!p) p = ValueOrThrow(ctx.previews->Share(s->id(), port, false, kPreviewTtlMs));
  std::string token = p->is_public ? "" : control::Previews::Token(*p, NowMs() + p->ttl_ms);
  ex.SendJson(200, json{{"sandboxId", s->id()},
                        {"url", PreviewUrl(ctx.ports, s->id(), port)},
                        {"token", token}});
}

void SetNetwork(ApiContext& ctx, Exchange& ex) {
  auto s = FindDaytona(ctx, ex);
  network::Policy policy = ReadNetwork(ex.JsonBody());
  ValueOrThrow(ctx.sandboxes.SetNetwork(s, policy));
  ex.SendJson(200, Present(ctx, ex, *s));
}

}  // namespace

json Present(ApiContext& ctx, const Exchange& ex, const control::Sandbox& s) {
  control::SandboxRecord r = s.Record();
  return SandboxJson(r, SnapshotName(ctx, r.spec), ToolboxUrl(ex));
}

}  // namespace kiln::api::daytona

namespace kiln::api {

void AddDaytonaRoutes(Router& r, ApiContext& ctx) {
  using namespace daytona;
  r.Add("POST", "/daytona/sandbox", [&ctx](Exchange& ex) { Create(ctx, ex); });
  r.Add("GET", "/daytona/sandbox", [&ctx](Exchange& ex) { List(ctx, ex); });
  r.Add("GET", "/daytona/sandbox/{id}", [&ctx](Exchange& ex) {
    auto s = FindDaytona(ctx, ex);
    ex.SendJson(200, Present(ctx, ex, *s));
  });
  r.Add("DELETE", "/daytona/sandbox/{id}", [&ctx](Exchange& ex) { Delete(ctx, ex); });
  r.Add("POST", "/daytona/sandbox/{id}/stop", [&ctx](Exchange& ex) { Stop(ctx, ex); });
  r.Add("POST", "/daytona/sandbox/{id}/start", [&ctx](Exchange& ex) { Start(ctx, ex); });
  r.Add("PUT", "/daytona/sandbox/{id}/labels", [&ctx](Exchange& ex) { SetLabels(ctx, ex); });
  r.Add("POST", "/daytona/sandbox/{id}/network-settings",
        [&ctx](Exchange& ex) { SetNetwork(ctx, ex); });
  r.Add("GET", "/daytona/sandbox/{id}/ports/{port}/preview-url",
        [&ctx](Exchange& ex) { PreviewLink(ctx, ex); });
  r.Add("GET", "/daytona/sandbox/{id}/toolbox-proxy-url", [&ctx](Exchange& ex) {
    (void)FindDaytona(ctx, ex);
    ex.SendJson(200, json{{"url", ToolboxUrl(ex)}});
  });
  // Activity: any call on a sandbox already counts as use.
  r.Add("POST", "/daytona/sandbox/{id}/last-activity", [&ctx](Exchange& ex) {
    (void)FindDaytona(ctx, ex);
    ex.SendBytes(204, "", "text/plain");
  });
  AddProcessRoutes(r, ctx);
  AddSessionRoutes(r, ctx);
  AddFileRoutes(r, ctx);
  AddSnapshotRoutes(r, ctx);
}

}  // namespace kiln::api
