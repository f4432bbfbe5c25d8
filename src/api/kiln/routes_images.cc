// Images: POST/GET /v1/images, GET /v1/images/{id}, .../logs, :tag,
// :untag, :delete, :pool, GET /v1/images/resolve, build contexts
// (POST /v1/images/context/missing, PUT /v1/images/context/{digest}),
// registry credentials (GET/POST /v1/images/registries, :delete) and
// POST /v1/images:prune.
#include "api/auth.h"
#include "api/errors.h"
#include "api/kiln/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/requests.h"
#include "api/kiln/routes.h"
#include "api/upload_body.h"
#include "images/manager/image_manager.h"

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

constexpr uint64_t kMaxContext = kMaxContextBytes;
constexpr size_t kMaxRegistries = 20;

images::ImageManager& Images(ApiContext& ctx) {
  if (!ctx.images) throw ApiError(Code::kRouteNotFound, "this kilnd serves no images");
  return *ctx.images;
}

// ImageInfo of `record`, with its warm copy's pool.
json Present(ApiContext& ctx, const images::ImageRecord& record) {
  control::PoolStatus pool;
  if (record.warm_snapshot) pool = ctx.sandboxes.snapshots().PoolOf(*record.warm_snapshot);
  return ImageJson(record, pool);
}

// :tag and :untag, {tag}.
void TagRoute(ApiContext& ctx, Exchange& ex, bool add) {
  std::string tag = ReadTag(ex.JsonBody());
  images::ImageManager& m = Images(ctx);
  auto scope = OwnerScope(ex);
  ex.SendJson(200, Present(ctx, ValueOrThrow(add ? m.Tag(ex.params["id"], tag, scope)
                                                 : m.Untag(ex.params["id"], tag, scope))));
}

// PUT /v1/images/context/...: the body streamed to a file (at most
// kMaxContext), then checked and kept as the key's.
void PutContext(ApiContext& ctx, Exchange& ex, bool chunk) {
  Sha256Digest digest = ReadContextDigest(ex, chunk);
  std::string path = Images(ctx).UploadPath();
  ReceiveUpload(ex, path,
                UploadCap{kMaxContext, "a build context is at most 100 MiB compressed",
                          json{{"limit", "compressedBytes"}, {"max", kMaxContext}}});
  images::ContextUpload up =
      ValueOrThrow(Images(ctx).PutContext(CallerOf(ex).key_id, digest, path, chunk));
  ex.SendJson(200, ContextUploadJson(up));
}

// GET …/logs?follow=true asked for NDJSON (the reference client's
// follow_logs): {type: line, seq, ...} per line as it is written, then
// {type: done, image}; past kLogStreamMs without an end, {type: continue,
// after} so the client asks again (a build may run for an hour; a request
// should not). A JSON answer (kiln's SDKs, the CLI) stays a long-poll page.
constexpr auto kLogStreamMs = std::chrono::milliseconds(300000);

void FollowLogStream(ApiContext& ctx, Exchange& ex, int64_t after) {
  const std::string id = ex.params["id"];
  auto scope = OwnerScope(ex);
  // Errors before the first byte (an unknown image) answer as JSON.
  images::LogPage page = ValueOrThrow(Images(ctx).Logs(id, scope, after, 1000, std::nullopt));
  if (!ex.BeginStream(200, "application/x-ndjson")) return;
  auto line = [&](const json& j) {
    return ex.WriteChunk(j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
  };
  auto end = std::chrono::steady_clock::now() + kLogStreamMs;
  for (;;) {
    for (const images::LogLine& l : page.lines) {
      if (!line(BuildLogLineEventJson(l))) return;
    }
    after = page.next_after;
    if (page.done) {
      Result<images::ImageRecord> rec = Images(ctx).Get(id, scope);
      if (rec.ok()) line(BuildLogDoneEventJson(Present(ctx, *rec)));
      return ex.EndStream();
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= end || ex.ClientGone()) {
      line(BuildLogContinueEventJson(after));
      return ex.EndStream();
    }
    Result<images::LogPage> next =
        Images(ctx).Logs(id, scope, after, 1000, std::min(end, now + std::chrono::seconds(1)));
    if (!next.ok()) {
      line(StreamErrorJson(CodeName(next.status().code()), next.status().message()));
      return ex.EndStream();
    }
    page = std::move(*next);
  }
}

}  // namespace

void AddImageRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/v1/images", [&ctx](Exchange& ex) {
    std::optional<ChunkedContext> chunked;
    images::ImageRequest req = ReadImageRequest(ex.JsonBody(), CallerOf(ex).key_id, &chunked);
    if (chunked)
      req.context = ValueOrThrow(Images(ctx).AssembleContext(
          req.owner, chunked->archive, chunked->size, chunked->chunks, "body.context"));
    images::ImageRecord record = ValueOrThrow(Images(ctx).Submit(std::move(req)));
    ex.SendJson(202, Present(ctx, record));
  });

  r.Add("GET", "/v1/images", [&ctx](Exchange& ex) {
    json data = json::array();
    int64_t limit = QueryInt(ex, "limit", 1, 100, 100);
    images::ImageManager& m = Images(ctx);
    // A state that is none of the states matches no image.
    std::optional<std::string> state_name = ex.Query("state");
    std::optional<images::ImageState> state;
    if (state_name) state = images::ParseImageState(*state_name);
    if (!state_name || state) {
      for (const auto& rec : m.List(OwnerScope(ex), ex.Query("name"), state)) {
        if (static_cast<int64_t>(data.size()) >= limit) break;
        data.push_back(Present(ctx, rec));
      }
    }
    ex.SendJson(200, PageJson(std::move(data), std::nullopt));
  });

  r.Add("GET", "/v1/images/resolve", [&ctx](Exchange& ex) {
    auto ref = ex.Query("ref");
    if (!ref || ref->empty()) throw InvalidField("query.ref", "is required");
    ex.SendJson(200, Present(ctx, ValueOrThrow(Images(ctx).Resolve(*ref, OwnerScope(ex)))));
  });

  r.Add("GET", "/v1/images/registries", [&ctx](Exchange& ex) {
    json data = json::array();
    for (const auto& c : Images(ctx).Registries(CallerOf(ex).key_id))
      data.push_back(RegistryJson(c));
    ex.SendJson(200, ListJson(std::move(data)));
  });

  r.Add("POST", "/v1/images/registries", [&ctx](Exchange& ex) {
    store::RegistryCredential c = ReadRegistry(ex.JsonBody());
    std::string owner = CallerOf(ex).key_id;
    auto have = Images(ctx).Registries(owner);
    bool known = std::any_of(have.begin(), have.end(),
                             [&](const auto& h) { return h.registry == c.registry; });
    if (!known && have.size() >= kMaxRegistries)
      throw ApiError(Code::kQuotaExceeded, "a key keeps at most 20 registry credentials");
    ex.SendJson(200, RegistryJson(Images(ctx).SetRegistry(owner, c)));
  });

  r.Add("POST", "/v1/images/registries:delete", [&ctx](Exchange& ex) {
    std::string registry = ReadRegistryDelete(ex.JsonBody());
    if (!Images(ctx).DeleteRegistry(CallerOf(ex).key_id, registry))
      throw ApiError(Code::kNotFound, "no credential for registry " + registry);
    ex.SendJson(200, RegistryDeletedJson(registry));
  });

  r.Add("POST", "/v1/images/context/missing", [&ctx](Exchange& ex) {
    DigestsAsked asked = ReadDigestsAsked(ex.JsonBody());
    std::vector<std::string> missing;
    for (const auto& d : Images(ctx).MissingContexts(CallerOf(ex).key_id, asked.digests))
      missing.push_back(asked.spelled.at(d));
    ex.SendJson(200, MissingContextsJson(missing));
  });

  // A whole context at sha256:<hex>; a chunk of one (Runtime's client) at <hex>.
  r.Add("PUT", "/v1/images/context/sha256:{digest}",
        [&ctx](Exchange& ex) { PutContext(ctx, ex, /*chunk=*/false); });
  r.Add("PUT", "/v1/images/context/{digest}",
        [&ctx](Exchange& ex) { PutContext(ctx, ex, /*chunk=*/true); });

  r.Add("POST", "/v1/images:prune", [&ctx](Exchange& ex) {
    FieldReader(ex.JsonBody()).Finish();
    RequireAdmin(ex, "pruning the host's image storage needs the admin key");
    ex.SendJson(200, Images(ctx).Prune());
  });

  r.Add("GET", "/v1/images/{id}", [&ctx](Exchange& ex) {
    ex.SendJson(200, Present(ctx, ValueOrThrow(Images(ctx).Get(ex.params["id"], OwnerScope(ex)))));
  });

  r.Add("GET", "/v1/images/{id}/logs", [&ctx](Exchange& ex) {
    ImageLogQuery q = ReadImageLogQuery(ex);
    if (q.follow && ex.Header("Accept").find("application/x-ndjson") != std::string::npos)
      return FollowLogStream(ctx, ex, q.after);
    std::optional<std::chrono::steady_clock::time_point> until;
    if (q.follow) until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    images::LogPage page = ValueOrThrow(Images(ctx).Logs(ex.params["id"], OwnerScope(ex), q.after,
                                                         static_cast<size_t>(q.limit), until));
    images::ImageRecord rec = ValueOrThrow(Images(ctx).Get(ex.params["id"], OwnerScope(ex)));
    ex.SendJson(200, BuildLogPageJson(page, rec.state));
  });

  r.Add("POST", "/v1/images/{id}:tag", [&ctx](Exchange& ex) { TagRoute(ctx, ex, true); });
  r.Add("POST", "/v1/images/{id}:untag", [&ctx](Exchange& ex) { TagRoute(ctx, ex, false); });

  r.Add("POST", "/v1/images/{id}:delete", [&ctx](Exchange& ex) {
    FieldReader(ex.JsonBody()).Finish();
    ex.SendJson(200,
                Present(ctx, ValueOrThrow(Images(ctx).Delete(ex.params["id"], OwnerScope(ex)))));
  });

  r.Add("POST", "/v1/images/{id}:pool", [&ctx](Exchange& ex) {
    std::optional<int> size = ReadPool(ex.JsonBody());
    ex.SendJson(
        200,
        PoolJson(ValueOrThrow(Images(ctx).Pool(ex.params["id"], OwnerScope(ex), size, !size))));
  });
}

}  // namespace kiln::api::v1
