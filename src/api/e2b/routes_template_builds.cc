// E2B's template builds under /e2b (see templates.h): POST /v3/templates,
// GET /templates/{id}/files/{hash} and the signed upload it hands out,
// POST /v2/templates/{id}/builds/{buildID}, GET .../builds/{buildID}/status,
// and tags (GET /templates/{id}/tags, POST and DELETE /templates/tags).
// Each reads its body, calls images::StagedBuilds or ImageManager, and
// renders the answer in E2B's shape.
#include "api/auth.h"
#include "api/e2b/e2b.h"
#include "api/e2b/routes.h"
#include "api/e2b/templates.h"
#include "api/errors.h"
#include "api/request_target.h"
#include "api/upload_body.h"
#include "api/validate.h"
#include "common/time.h"
#include "images/manager/image_manager.h"
#include "images/manager/staged_builds.h"

namespace kiln::api::e2b {

using nlohmann::json;

namespace template_build_routes {
namespace {

constexpr size_t kLogEntriesPerPage = 100;  // E2B's page of a build's log

images::StagedBuilds& Staged(ApiContext& ctx) {
  if (!ctx.staged_builds || !ctx.images)
    throw ApiError(Code::kNotSupported, "this kilnd builds no templates",
                   json{{"feature", "template builds"}});
  return *ctx.staged_builds;
}

// E2B has no admin: a key's templates are its own, an admin key's too.
const std::string& Owner(const Exchange& ex) { return CallerOf(ex).key_id; }
std::optional<std::string> OwnScope(const Exchange& ex) { return Owner(ex); }

// The template a path names: a kiln image name of the key's ("name" of
// "name:tag").
std::string TemplateName(const std::string& id) {
  std::string ref = KilnTemplateRef(id);
  size_t colon = ref.rfind(':');
  size_t slash = ref.rfind('/');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash))
    ref = ref.substr(0, colon);
  if (Status s = images::ValidateImageName(ref); !s.ok())
    throw ApiError(Code::kNotFound, "template '" + id + "' was not found",
                   json{{"templateID", id}});
  return ref;
}

// The origin the client reached kilnd at: upload links go back to it.
std::string Origin(const Exchange& ex) {
  std::string proto = ex.Header("X-Forwarded-Proto") == "https" ? "https" : "http";
  return proto + "://" + ex.Header("Host");
}

void Reserve(ApiContext& ctx, Exchange& ex) {
  TemplateRequest req = ReadTemplateRequest(ex.JsonBody());
  std::optional<Shape> shape;
  if (req.given.vcpu || req.given.memory || req.given.disk)
    shape = ShapeOver(req.shape, req.given, Shape{});
  images::StagedBuilds::Reservation r =
      ValueOrThrow(Staged(ctx).Reserve(Owner(ex), req.name, req.tags, shape));
  json tags = json::array();
  for (const auto& t : r.tags.empty() ? std::vector<std::string>{"latest"} : r.tags)
    tags.push_back(E2bTag(t));
  ex.SendJson(202, json{{"templateID", r.name},
                        {"buildID", r.build_id},
                        {"public", false},
                        {"names", {r.name}},
                        {"aliases", {r.name}},
                        {"tags", tags}});
}

// Whether the key has the files of `hash`; if not, where to PUT them: a
// link signed for this key, template and hash, good for an hour.
void FileLink(ApiContext& ctx, Exchange& ex) {
  std::string name = TemplateName(ex.params["id"]);
  const std::string& hash = ex.params["hash"];
  ThrowIfError(images::StagedBuilds::CheckHash(hash, "path.hash"));
  // Files go to a template of the caller's: one it is building, or has.
  if (!Staged(ctx).Reserves(Owner(ex), name) && TemplateVersions(ctx, ex, name).empty())
    throw ApiError(Code::kNotFound, "template '" + name + "' was not found",
                   json{{"templateID", name}});
  if (Staged(ctx).Piece(Owner(ex), hash)) {
    ex.SendJson(201, json{{"present", true}});
    return;
  }
  int64_t expires = NowMs() + images::UploadLinks::kTtlMs;
  std::string signature = Staged(ctx).links().Sign(Owner(ex), name, hash, expires);
  std::string url = Origin(ex) + kUploadPrefix + hash + "?template=" + PercentEncode(name) +
                    "&key=" + PercentEncode(Owner(ex)) + "&expires=" + std::to_string(expires) +
                    "&signature=" + signature;
  ex.SendJson(201, json{{"present", false}, {"url", url}});
}

// PUT to an upload link: no API key, the link's signature instead; the
// key it was signed for must still be live.
void Upload(ApiContext& ctx, Exchange& ex) {
  const std::string& hash = ex.params["hash"];
  std::string name = ex.Query("template").value_or("");
  std::string owner = ex.Query("key").value_or("");
  std::string signature = ex.Query("signature").value_or("");
  int64_t expires = 0;
  try {
    expires = std::stoll(ex.Query("expires").value_or("0"));
  } catch (const std::exception&) {
    expires = 0;
  }
  auto refused = [] {
    return ApiError(Code::kForbidden,
                    "the upload link is not valid: it has expired, or is not "
                    "one kilnd signed; ask for a new one");
  };
  if (images::StagedBuilds::CheckHash(hash, "path.hash").ok() == false) throw refused();
  if (!Staged(ctx).links().Check(owner, name, hash, expires, signature, NowMs())) throw refused();
  if (!ctx.keys.Live(owner)) throw refused();  // links die with their key
  std::string path = ctx.images->UploadPath();
  ReceiveUpload(
      ex, path,
      UploadCap{images::StagedBuilds::kMaxPieceBytes,
                "a template's files are at most 100 MiB compressed per COPY",
                json{{"limit", "compressedBytes"}, {"max", images::StagedBuilds::kMaxPieceBytes}}});
  ValueOrThrow(Staged(ctx).PutPiece(owner, hash, path));
  ex.SendBytes(200, "", "application/json");
}

void StartBuild(ApiContext& ctx, Exchange& ex) {
  std::string name = TemplateName(ex.params["id"]);
  const std::string& build_id = ex.params["build"];
  auto reserved = Staged(ctx).Reserved(build_id, Owner(ex));
  if (!reserved || reserved->name != name)
    throw ApiError(Code::kNotFound,
                   "build " + build_id + " of template " + name +
                       " was not requested by this key (POST /v3/templates)",
                   json{{"buildID", build_id}});
  TemplateBuild build = ReadTemplateBuild(ex.JsonBody(16 << 20));
  const std::string owner = Owner(ex);
  KilnTemplateBuild kiln = ValueOrThrow(TemplateDockerfile(
      build, [&](const std::string& hash) { return Staged(ctx).Piece(owner, hash); }));
  images::ImageRequest req;
  req.source = images::ImageSource::kDockerfile;
  req.dockerfile = std::move(kiln.dockerfile);
  req.named_contexts = std::move(kiln.contexts);
  req.step_names = std::move(kiln.step_names);
  req.rebuild_from_step = kiln.rebuild_from_step;
  req.cache = kiln.cache;
  req.start = std::move(kiln.start);
  // E2B's builds reach the internet (public addresses only, through kiln's
  // egress proxy, as every sandbox's).
  req.network.internet = true;
  ValueOrThrow(Staged(ctx).Submit(build_id, owner, std::move(req)));
  ex.SendBytes(202, "", "application/json");
}

void BuildStatus(ApiContext& ctx, Exchange& ex) {
  std::string name = TemplateName(ex.params["id"]);
  const std::string& build_id = ex.params["build"];
  if (auto r = Staged(ctx).Reserved(build_id, Owner(ex)); r && r->name == name) {
    ex.SendJson(200, WaitingStatusJson(name, build_id));
    return;
  }
  auto record = ctx.images->Get(build_id, OwnScope(ex));
  if (!record.ok() || record->name != name)
    throw ApiError(Code::kNotFound, "build " + build_id + " of template " + name + " was not found",
                   json{{"buildID", build_id}});
  int64_t offset = QueryInt(ex, "logsOffset", 0, int64_t{1} << 40, 0);
  images::LogPage page = ValueOrThrow(
      ctx.images->Logs(build_id, OwnScope(ex), offset, kLogEntriesPerPage, std::nullopt));
  // Read after the log: a build that ended in between shows its last lines
  // on the next call (the SDK reads until a page comes back empty).
  record = ctx.images->Get(build_id, OwnScope(ex));
  ex.SendJson(200, BuildStatusJson(ValueOrThrow(std::move(record)), page));
}

void ListTags(ApiContext& ctx, Exchange& ex) {
  std::string name = TemplateName(ex.params["id"]);
  auto versions = TemplateVersions(ctx, ex, name);
  if (versions.empty())
    throw ApiError(Code::kNotFound, "template '" + name + "' was not found",
                   json{{"templateID", name}});
  json items = json::array();
  for (const auto& rec : versions)
    for (const auto& tag : rec.tags)
      items.push_back(
          {{"tag", E2bTag(tag)}, {"buildID", rec.id}, {"createdAt", FormatTime(rec.ready_ms)}});
  ex.SendJson(200, items);
}

std::vector<std::string> ReadTagList(FieldReader& f) {
  auto tags = f.StringList("tags", 32);
  if (!tags && !f.has("tags")) f.Issue("tags", "is required: the tags");
  std::vector<std::string> kiln;
  for (const auto& t : tags.value_or(std::vector<std::string>{}))
    kiln.push_back(t == kDefaultTag ? "latest" : t);
  return kiln;
}

void AssignTags(ApiContext& ctx, Exchange& ex) {
  json body = WithoutNulls(ex.JsonBody());
  FieldReader f(body);
  auto target = f.String("target", 256);
  if (!target && !f.has("target")) f.Issue("target", "is required: name:tag of a build");
  std::vector<std::string> tags = ReadTagList(f);
  f.Finish();
  std::string ref = KilnTemplateRef(*target);
  images::ImageRecord rec = ValueOrThrow(ctx.images->Resolve(ref, OwnScope(ex)));
  if (rec.owner != Owner(ex))
    throw ApiError(Code::kNotFound, "template '" + *target + "' was not found");
  for (const auto& tag : tags) rec = ValueOrThrow(ctx.images->Tag(rec.id, tag, OwnScope(ex)));
  json shown = json::array();
  for (const auto& t : tags) shown.push_back(E2bTag(t));
  ex.SendJson(201, json{{"buildID", rec.id}, {"tags", shown}});
}

void RemoveTags(ApiContext& ctx, Exchange& ex) {
  json body = WithoutNulls(ex.JsonBody());
  FieldReader f(body);
  auto name = f.String("name", 256);
  if (!name && !f.has("name")) f.Issue("name", "is required: the template");
  std::vector<std::string> tags = ReadTagList(f);
  f.Finish();
  std::string template_name = TemplateName(*name);
  for (const auto& tag : tags) {
    auto rec = ctx.images->Resolve(template_name + ":" + tag, OwnScope(ex));
    if (!rec.ok() || rec->owner != Owner(ex))
      throw ApiError(Code::kNotFound, "template " + template_name + " has no tag " + E2bTag(tag),
                     json{{"tag", E2bTag(tag)}});
    ValueOrThrow(ctx.images->Untag(rec->id, tag, OwnScope(ex)));
  }
  ex.SendBytes(204, "", "application/json");
}

}  // namespace
}  // namespace template_build_routes

std::vector<images::ImageRecord> TemplateVersions(ApiContext& ctx, const Exchange& ex,
                                                  const std::string& name) {
  using template_build_routes::Owner;
  std::vector<images::ImageRecord> out;
  for (auto& rec : ctx.images->List(Owner(ex), name, std::nullopt))
    if (rec.owner == Owner(ex)) out.push_back(std::move(rec));
  return out;
}

void AddTemplateBuildRoutes(Router& r, ApiContext& ctx) {
  using namespace template_build_routes;
  r.Add("POST", "/e2b/v3/templates", [&ctx](Exchange& ex) { Reserve(ctx, ex); });
  r.Add("GET", "/e2b/templates/{id}/files/{hash}", [&ctx](Exchange& ex) { FileLink(ctx, ex); });
  r.Add("PUT", "/e2b/template-uploads/{hash}", [&ctx](Exchange& ex) { Upload(ctx, ex); });
  r.Add("POST", "/e2b/v2/templates/{id}/builds/{build}",
        [&ctx](Exchange& ex) { StartBuild(ctx, ex); });
  r.Add("GET", "/e2b/templates/{id}/builds/{build}/status",
        [&ctx](Exchange& ex) { BuildStatus(ctx, ex); });
  r.Add("POST", "/e2b/templates/tags", [&ctx](Exchange& ex) { AssignTags(ctx, ex); });
  r.Add("DELETE", "/e2b/templates/tags", [&ctx](Exchange& ex) { RemoveTags(ctx, ex); });
  r.Add("GET", "/e2b/templates/{id}/tags", [&ctx](Exchange& ex) { ListTags(ctx, ex); });
}

}  // namespace kiln::api::e2b
