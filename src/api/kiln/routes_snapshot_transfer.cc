// Moving snapshots between hosts, over control::SnapshotTransferService:
// GET /v1/snapshots/{id}/archive streams a snapshot as a tar
// (store/snapshot_transfer.h), POST /v1/snapshots:import takes one, checks
// every checksum and lists it as the importing key's; GET /v1/images:layers
// names the image layers an import here can skip.
#include <algorithm>
#include <set>

#include "api/auth.h"
#include "api/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/routes.h"
#include "common/thread_nice.h"
#include "control/snapshot_transfer_service.h"
#include "images/manager/image_manager.h"

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

// The service over this kilnd's snapshots and, when it keeps images, their
// layers (images::ImageManager is the control::SnapshotLayers).
control::SnapshotTransferService Transfer(ApiContext& ctx) { return {ctx.sandboxes, ctx.images}; }

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
    auto tar = ValueOrThrow(Transfer(ctx).Export(rec, skip));
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
    ex.SendJson(200, json{{"layers", Transfer(ctx).TransferableLayers()}});
  });

  r.Add("POST", "/v1/snapshots:import", [&ctx](Exchange& ex) {
    if (!IsTarType(ex.Header("Content-Type")))
      throw InvalidField("header.Content-Type",
                         "must be application/x-tar (a tar from GET /v1/snapshots/{id}/archive)");
    // A body cut short is answered as such, whatever the tar's reader made
    // of its end (the import is undone).
    auto body = [&ex](std::string* chunk) {
      if (ex.ReadBodyChunk(chunk)) return true;
      if (ex.body_error())
        throw ApiError(Code::kInvalidArchive,
                       "body: the upload ended early (the tar is truncated)");
      return false;
    };
    store::ImportResult done =
        ValueOrThrow(Transfer(ctx).Import(CallerOf(ex).key_id, ex.content_length(), body));
    ex.SendJson(done.created ? 201 : 200,
                SnapshotJson(done.record, ctx.sandboxes.snapshots().PoolOf(done.record.id)));
  });
}

}  // namespace kiln::api::v1
