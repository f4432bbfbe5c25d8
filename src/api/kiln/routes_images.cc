// Images: POST/GET /v1/images, GET /v1/images/{id}, .../logs, :tag,
// :untag, :delete, :pool, GET /v1/images/resolve, build contexts
// (POST /v1/images/context/missing, PUT /v1/images/context/{digest}),
// registry credentials (GET/POST /v1/images/registries, :delete) and
// POST /v1/images:prune.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "api/auth.h"
#include "api/errors.h"
#include "api/kiln/image_fields.h"
#include "api/kiln/presenters.h"
#include "api/kiln/routes.h"
#include "common/time.h"
#include "images/manager/image_manager.h"

namespace kiln::api {

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
  if (record.warm_snapshot) pool = ctx.sandboxes.SnapshotPool(*record.warm_snapshot);
  return ImageJson(record, pool);
}

json RegistryJson(const store::RegistryCredential& c) {
  return json{
      {"registry", c.registry}, {"username", c.username}, {"createdAt", FormatTime(c.created_ms)}};
}

// :tag and :untag, {tag}.
void TagRoute(ApiContext& ctx, Exchange& ex, bool add) {
  json body = ex.JsonBody();
  FieldReader f(body);
  auto tag = f.String("tag", 128);
  if (!tag) f.Issue("tag", "is required");
  f.Finish();
  images::ImageManager& m = Images(ctx);
  auto scope = OwnerScope(ex);
  ex.SendJson(200, Present(ctx, ValueOrThrow(add ? m.Tag(ex.params["id"], *tag, scope)
                                                 : m.Untag(ex.params["id"], *tag, scope))));
}

}  // namespace

namespace {

// PUT /v1/images/context/...: the body streamed to a file (at most
// kMaxContext), then checked and kept as the key's.
void PutContext(ApiContext& ctx, Exchange& ex, bool chunk) {
  std::optional<Sha256Digest> digest = Sha256Digest::FromHex(ex.params["digest"]);
  if (!digest)
    throw InvalidField("path.digest",
                       chunk ? "must be 64 lowercase hex digits (the body's sha256)"
                             : "must be sha256:<64 lowercase hex> (the body's sha256)");
  if (auto n = ex.content_length(); n && *n > kMaxContext)
    throw ApiError(Code::kPayloadTooLarge, "a build context is at most 100 MiB compressed",
                   json{{"limit", "compressedBytes"}, {"max", kMaxContext}});
  std::string path = Images(ctx).UploadPath();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    std::string piece;
    uint64_t total = 0;
    int write_errno = 0;
    while (ex.ReadBodyChunk(&piece)) {
      total += piece.size();
      if (total > kMaxContext) {
        out.close();
        std::filesystem::remove(path);
        throw ApiError(Code::kPayloadTooLarge, "a build context is at most 100 MiB compressed",
                       json{{"limit", "compressedBytes"}, {"max", kMaxContext}});
      }
      // After a failed write the rest of the body is still read (and
      // dropped), so the answer reaches a client that is still sending.
      if (out && !out.write(piece.data(), static_cast<std::streamsize>(piece.size())))
        write_errno = errno;
    }
    if (out && !out.flush()) write_errno = errno;
    if (ex.body_error() || !out) {
      out.close();
      std::filesystem::remove(path);
      if (ex.body_error()) throw ApiError(Code::kInvalidRequest, "body: the upload ended early");
      bool full = write_errno == ENOSPC || write_errno == EDQUOT;
      throw ApiError(full ? Code::kNoSpace : Code::kIoError,
                     std::string(full ? "no space left on the state disk for the build context"
                                      : "cannot store the build context") +
                         " (" + std::strerror(write_errno) + ")");
    }
  }
  images::ContextUpload up =
      ValueOrThrow(Images(ctx).PutContext(CallerOf(ex).key_id, *digest, path, chunk));
  ex.SendJson(200, json{{"digest", up.digest}, {"sizeBytes", up.size_bytes}});
}

}  // namespace

namespace {

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
      json event = l;
      event["type"] = "line";
      event["seq"] = l.n;
      if (!line(event)) return;
    }
    after = page.next_after;
    if (page.done) {
      Result<images::ImageRecord> rec = Images(ctx).Get(id, scope);
      if (rec.ok()) line(json{{"type", "done"}, {"image", Present(ctx, *rec)}});
      return ex.EndStream();
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= end || ex.ClientGone()) {
      line(json{{"type", "continue"}, {"after", after}});
      return ex.EndStream();
    }
    Result<images::LogPage> next =
        Images(ctx).Logs(id, scope, after, 1000, std::min(end, now + std::chrono::seconds(1)));
    if (!next.ok()) {
      line(
          json{{"type", "error"},
               {"error",
                {{"code", CodeName(next.status().code())}, {"message", next.status().message()}}}});
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
    ex.SendJson(200, json{{"data", data}, {"nextCursor", nullptr}});
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
    ex.SendJson(200, json{{"data", data}});
  });

  r.Add("POST", "/v1/images/registries", [&ctx](Exchange& ex) {
    json body = ex.JsonBody();
    FieldReader f(body);
    store::RegistryCredential c;
    auto registry = f.String("registry", 255);
    auto username = f.String("username", 255);
    auto password = f.String("password", 8192);
    if (!registry || registry->empty()) f.Issue("registry", "is required (host[:port])");
    if (!username) f.Issue("username", "is required");
    if (!password) f.Issue("password", "is required");
    f.Finish();
    c.registry = *registry;
    c.username = *username;
    c.password = *password;
    if (c.registry.find('/') != std::string::npos)
      throw InvalidField("body.registry", "is a host[:port], without a scheme or path");
    std::string owner = CallerOf(ex).key_id;
    auto have = Images(ctx).Registries(owner);
    bool known = std::any_of(have.begin(), have.end(),
                             [&](const auto& h) { return h.registry == c.registry; });
    if (!known && have.size() >= kMaxRegistries)
      throw ApiError(Code::kQuotaExceeded, "a key keeps at most 20 registry credentials");
    ex.SendJson(200, RegistryJson(Images(ctx).SetRegistry(owner, c)));
  });

  r.Add("POST", "/v1/images/registries:delete", [&ctx](Exchange& ex) {
    json body = ex.JsonBody();
    FieldReader f(body);
    auto registry = f.String("registry", 255);
    if (!registry) f.Issue("registry", "is required");
    f.Finish();
    if (!Images(ctx).DeleteRegistry(CallerOf(ex).key_id, *registry))
      throw ApiError(Code::kNotFound, "no credential for registry " + *registry);
    ex.SendJson(200, json{{"registry", *registry}, {"deleted", true}});
  });

  r.Add("POST", "/v1/images/context/missing", [&ctx](Exchange& ex) {
    json body = ex.JsonBody();
    FieldReader f(body);
    auto digests = f.StringList("digests", 1000);
    if (!digests) f.Issue("digests", "is required: [\"sha256:<hex>\", ...]");
    std::vector<Sha256Digest> parsed;
    std::map<Sha256Digest, std::string> asked;  // answered in the caller's own spelling
    for (size_t i = 0; digests && i < digests->size(); ++i) {
      std::optional<Sha256Digest> d = Sha256Digest::Parse((*digests)[i]);
      if (!d) d = Sha256Digest::FromHex((*digests)[i]);
      if (!d) {
        f.Issue("digests[" + std::to_string(i) + "]", "must be \"sha256:<64 lowercase hex>\"");
      } else {
        parsed.push_back(*d);
        asked.emplace(*d, (*digests)[i]);
      }
    }
    f.Finish();
    json missing = json::array();
    for (const auto& d : Images(ctx).MissingContexts(CallerOf(ex).key_id, parsed))
      missing.push_back(asked.at(d));
    ex.SendJson(200, json{{"missing", missing}});
  });

  // A whole context at sha256:<hex>; a chunk of one (Runtime's client) at <hex>.
  r.Add("PUT", "/v1/images/context/sha256:{digest}",
        [&ctx](Exchange& ex) { PutContext(ctx, ex, /*chunk=*/false); });
  r.Add("PUT", "/v1/images/context/{digest}",
        [&ctx](Exchange& ex) { PutContext(ctx, ex, /*chunk=*/true); });

  r.Add("POST", "/v1/images:prune", [&ctx](Exchange& ex) {
    FieldReader(ex.JsonBody()).Finish();
    if (!CallerOf(ex).admin)
      throw ApiError(Code::kForbidden, "pruning the host's image storage needs the admin key");
    ex.SendJson(200, Images(ctx).Prune());
  });

  r.Add("GET", "/v1/images/{id}", [&ctx](Exchange& ex) {
    ex.SendJson(200, Present(ctx, ValueOrThrow(Images(ctx).Get(ex.params["id"], OwnerScope(ex)))));
  });

  r.Add("GET", "/v1/images/{id}/logs", [&ctx](Exchange& ex) {
    int64_t after = QueryInt(ex, "after", 0, INT64_MAX, 0);
    int64_t limit = QueryInt(ex, "limit", 1, 10000, 1000);
    auto follow = ex.Query("follow");
    bool following = follow && (*follow == "true" || *follow == "1");
    if (following && ex.Header("Accept").find("application/x-ndjson") != std::string::npos)
      return FollowLogStream(ctx, ex, after);
    std::optional<std::chrono::steady_clock::time_point> until;
    if (following) until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    images::LogPage page = ValueOrThrow(Images(ctx).Logs(ex.params["id"], OwnerScope(ex), after,
                                                         static_cast<size_t>(limit), until));
    images::ImageRecord rec = ValueOrThrow(Images(ctx).Get(ex.params["id"], OwnerScope(ex)));
    ex.SendJson(200, json{{"lines", page.lines},
                          {"nextAfter", page.next_after},
                          {"state", images::ImageStateName(rec.state)},
                          {"truncated", page.truncated},
                          {"done", page.done}});
  });

  r.Add("POST", "/v1/images/{id}:tag", [&ctx](Exchange& ex) { TagRoute(ctx, ex, true); });
  r.Add("POST", "/v1/images/{id}:untag", [&ctx](Exchange& ex) { TagRoute(ctx, ex, false); });

  r.Add("POST", "/v1/images/{id}:delete", [&ctx](Exchange& ex) {
    FieldReader(ex.JsonBody()).Finish();
    ex.SendJson(200,
                Present(ctx, ValueOrThrow(Images(ctx).Delete(ex.params["id"], OwnerScope(ex)))));
  });

  r.Add("POST", "/v1/images/{id}:pool", [&ctx](Exchange& ex) {
    json body = ex.JsonBody();
    FieldReader f(body);
    std::optional<int> size = ReadPoolSize(f);
    f.Finish();
    ex.SendJson(
        200,
        PoolJson(ValueOrThrow(Images(ctx).Pool(ex.params["id"], OwnerScope(ex), size, !size))));
  });
}

}  // namespace kiln::api
