// Snapshots and forks: POST /v1/sandboxes/{id}:snapshot, GET /v1/snapshots,
// GET /v1/snapshots/{id}, POST /v1/snapshots/{id}:delete,
// POST /v1/sandboxes/{id}:fork.
#include "api/errors.h"
#include "api/kiln/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/requests.h"
#include "api/kiln/routes.h"
#include "common/time.h"

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

json WithPool(ApiContext& ctx, const store::SnapshotRecord& rec) {
  return SnapshotJson(rec, ctx.sandboxes.snapshots().PoolOf(rec.id));
}

}  // namespace

void AddSnapshotRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/v1/sandboxes/{id}:snapshot", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    control::SnapshotOptions opts = ReadSnapshot(ex.JsonBody());
    auto rec = ValueOrThrow(ctx.sandboxes.Snapshot(s, opts));
    ex.SendJson(200, WithPool(ctx, rec));
  });

  r.Add("GET", "/v1/snapshots", [&ctx](Exchange& ex) {
    auto source = ex.Query("sandboxId");
    auto name = ex.Query("name");
    json data = json::array();
    auto scope = OwnerScope(ex);
    for (const auto& rec :
         ctx.sandboxes.snapshots().ListVisible(scope, control::SnapshotUse::kRead)) {
      if (source && rec.source_sandbox_id != *source) continue;
      if (name && (!rec.name || *rec.name != *name)) continue;
      data.push_back(WithPool(ctx, rec));
    }
    ex.SendJson(200, PageJson(std::move(data), std::nullopt));
  });

  r.Add("GET", "/v1/snapshots/{id}", [&ctx](Exchange& ex) {
    ex.SendJson(200, WithPool(ctx, FindSnapshot(ctx, ex, ex.params["id"])));
  });

  r.Add("POST", "/v1/snapshots/{id}:pool", [&ctx](Exchange& ex) {
    auto rec = FindSnapshot(ctx, ex, ex.params["id"]);
    std::optional<int> size = ReadPool(ex.JsonBody());
    ctx.sandboxes.snapshots().ResizePool(rec.id, size);
    ex.SendJson(200, WithPool(ctx, rec));
  });

  r.Add("POST", "/v1/snapshots/{id}:delete", [&ctx](Exchange& ex) {
    FieldReader(ex.JsonBody()).Finish();
    auto rec = FindSnapshot(ctx, ex, ex.params["id"]);
    ctx.sandboxes.snapshots().Delete(rec.id);
    ex.SendJson(200, DeletedSnapshotJson(rec, NowMs()));
  });

  r.Add("POST", "/v1/sandboxes/{id}:fork", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    control::ForkOptions opts = ReadFork(ex.JsonBody());
    control::ForkResult forked =
        ValueOrThrow(ctx.launcher.Fork(s, opts, PreferWaitDeadline(ex), PayerOf(ex)));
    json copies = SandboxesJson(forked.copies);
    // Names the copies that did start, so the caller can use or stop them.
    if (!forked.status.ok()) throw PartialForkError(forked.status, std::move(copies), opts.count);
    // The snapshot a keepSnapshot fork kept, for the caller to use or delete.
    ex.SendJson(200,
                ForkJson(std::move(copies), forked.kept ? WithPool(ctx, *forked.kept) : json()));
  });
}

}  // namespace kiln::api::v1
