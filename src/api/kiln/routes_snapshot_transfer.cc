// Moving snapshots between hosts: GET /v1/snapshots/{id}/archive streams a
// snapshot as a tar (store/snapshot_transfer.h), POST /v1/snapshots:import
// takes one, checks every checksum and lists it as the importing key's;
// GET /v1/images:layers names the image layers an import here can skip.
#include <algorithm>
#include <filesystem>
#include <set>

#include "api/auth.h"
#include "api/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/routes.h"
#include "api/validate.h"
#include "common/thread_nice.h"
#include "common/time.h"
#include "images/manager/image_manager.h"
#include "store/snapshot_transfer.h"

namespace kiln::api {

using nlohmann::json;

namespace {

// An image's layers travel in the tar too; the disk (507) and the image
// storage quota bound it before this does.
constexpr uint64_t kMaxImport = 64ull << 30;

store::TransferHost Host(ApiContext& ctx) {
  return {ctx.sandboxes.EngineInfo().version,
          std::filesystem::path(ctx.sandboxes.base_rootfs()).filename().string()};
}

// Labels and network rules under the same rules as a create's body.
Status CheckRecord(const store::SnapshotRecord& rec) {
  json probe = {{"labels", rec.labels}};
  if (!rec.network.is_null()) probe["network"] = rec.network;
  try {
    FieldReader f(probe);
    ReadLabels(f);
    ReadNetworkField(f);
    f.Finish();
  } catch (const ApiError& e) {
    return Status(Code::kInvalidArchive, "kiln-snapshot.json: record: " + e.status().message(),
                  e.status().details());
  }
  return Status::Ok();
}

bool IsTarType(const std::string& content_type) {
  std::string type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && type.back() == ' ') type.pop_back();
  for (auto& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return type == "application/x-tar";
}

// ?skipLayers=<sha256>,<sha256>: layers the receiver has (GET /v1/images:layers).
std::set<std::string> SkipLayers(Exchange& ex) {
  std::set<std::string> out;
  auto raw = ex.Query("skipLayers");
  if (!raw || raw->empty()) return out;
  std::string list = *raw;
  for (size_t at = 0; at <= list.size();) {
    size_t comma = std::min(list.find(',', at), list.size());
    std::string d = list.substr(at, comma - at);
    if (d.starts_with("sha256:")) d = d.substr(7);
    if (d.size() != 64 || d.find_first_not_of("0123456789abcdef") != std::string::npos)
      throw InvalidField("query.skipLayers",
                         "must be a comma-separated list of layer sha256 digests (64 lowercase "
                         "hex, as GET /v1/images:layers gives them); \"" +
                             d + "\" is not one");
    out.insert(d);
    at = comma + 1;
  }
  return out;
}

}  // namespace

void AddSnapshotTransferRoutes(Router& r, ApiContext& ctx) {
  r.Add("GET", "/v1/snapshots/{id}/archive", [&ctx](Exchange& ex) {
    auto rec = FindSnapshot(ctx, ex, ex.params["id"]);
    std::set<std::string> skip = SkipLayers(ex);
    std::vector<store::TransferLayer> layers;
    if ((rec.image || !rec.rootfs.empty()) && ctx.images)
      layers = ValueOrThrow(ctx.images->TransferLayers(rec));
    auto tar = ValueOrThrow(store::SnapshotExport::Prepare(ctx.sandboxes.snapshot_store(), rec,
                                                           Host(ctx), std::move(layers), skip));
    if (!ex.BeginStream(200, "application/x-tar",
                        {{"x-content-length", std::to_string(tar.size())},
                         {"content-disposition", "attachment; filename=\"" + rec.id + ".tar\""}}))
      return;
    ScopedThreadNice below_sandboxes(10);  // reading and checksumming on this thread
    // A tar cut short must not look like a whole one: abort, no last chunk.
    if (tar.Stream([&ex](std::string_view data) { return ex.WriteChunk(data); }))
      return ex.EndStream();
    ex.AbortStream();
  });

  // The digests an import here may leave out of its tar (admin only: which
  // layers a host holds says what its tenants pulled).
  r.Add("GET", "/v1/images:layers", [&ctx](Exchange& ex) {
    if (!CallerOf(ex).admin)
      throw ApiError(Code::kForbidden, "listing the host's image layers needs the admin key");
    ex.SendJson(200,
                json{{"layers", ctx.images ? ctx.images->TransferableLayers() : json::array()}});
  });

  r.Add("POST", "/v1/snapshots:import", [&ctx](Exchange& ex) {
    if (!IsTarType(ex.Header("Content-Type")))
      throw InvalidField("header.Content-Type",
                         "must be application/x-tar (a tar from GET /v1/snapshots/{id}/archive)");
    if (auto n = ex.content_length(); n && *n > kMaxImport)
      throw ApiError(Code::kPayloadTooLarge, "an imported snapshot's tar is at most 64 GiB");
    store::ImportRequest request{
        CallerOf(ex).key_id, Host(ctx), StableNowMs(), CheckRecord,
        ctx.images ? ctx.images->NewLayerSink(CallerOf(ex).key_id) : nullptr};
    store::SnapshotImport import(ctx.sandboxes.snapshot_store(), std::move(request));
    ScopedThreadNice below_sandboxes(10);  // checksums and unpacking on this thread
    auto result = import.Run([&ex](std::string* chunk) { return ex.ReadBodyChunk(chunk); });
    if (ex.body_error())
      throw ApiError(Code::kInvalidArchive, "body: the upload ended early (the tar is truncated)");
    store::ImportResult done = ValueOrThrow(std::move(result));
    if (done.created) ctx.sandboxes.SnapshotImported(done.record);
    ex.SendJson(done.created ? 201 : 200,
                SnapshotJson(done.record, ctx.sandboxes.SnapshotPool(done.record.id)));
  });
}

}  // namespace kiln::api
