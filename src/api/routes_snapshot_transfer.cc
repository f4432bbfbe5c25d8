// Moving snapshots between hosts: GET /v1/snapshots/{id}/archive streams a
// snapshot as a tar (store/snapshot_transfer.h), POST /v1/snapshots:import
// takes one, checks every checksum and lists it as the importing key's.
#include <filesystem>

#include "api/auth.h"
#include "api/errors.h"
#include "api/presenters.h"
#include "api/routes.h"
#include "api/validate.h"
#include "common/time.h"
#include "store/snapshot_transfer.h"

namespace kiln::api {

using nlohmann::json;

namespace {

// The server's cap on any request body (http_server.cc).
constexpr uint64_t kMaxImport = 1ull << 30;

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

}  // namespace

void AddSnapshotTransferRoutes(Router& r, ApiContext& ctx) {
  r.Add("GET", "/v1/snapshots/{id}/archive", [&ctx](Exchange& ex) {
    auto rec = FindSnapshot(ctx, ex, ex.params["id"]);
    auto tar = ValueOrThrow(
        store::SnapshotExport::Prepare(ctx.sandboxes.snapshot_store(), rec, Host(ctx)));
    if (!ex.BeginStream(200, "application/x-tar",
                        {{"x-content-length", std::to_string(tar.size())},
                         {"content-disposition", "attachment; filename=\"" + rec.id + ".tar\""}}))
      return;
    // A tar cut short must not look like a whole one: abort, no last chunk.
    if (tar.Stream([&ex](std::string_view data) { return ex.WriteChunk(data); }))
      return ex.EndStream();
    ex.AbortStream();
  });

  r.Add("POST", "/v1/snapshots:import", [&ctx](Exchange& ex) {
    if (!IsTarType(ex.Header("Content-Type")))
      throw InvalidField("header.Content-Type",
                         "must be application/x-tar (a tar from GET /v1/snapshots/{id}/archive)");
    if (auto n = ex.content_length(); n && *n > kMaxImport)
      throw ApiError(Code::kPayloadTooLarge, "an imported snapshot's tar is at most 1 GiB");
    store::ImportRequest request{CallerOf(ex).key_id, Host(ctx), StableNowMs(), CheckRecord};
    store::SnapshotImport import(ctx.sandboxes.snapshot_store(), std::move(request));
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
