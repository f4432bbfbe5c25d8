// Snapshots and forks: POST /v1/sandboxes/{id}:snapshot, GET /v1/snapshots,
// GET /v1/snapshots/{id}, POST /v1/snapshots/{id}:delete,
// POST /v1/sandboxes/{id}:fork.
#include "api/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/routes.h"
#include "api/validate.h"
#include "common/contract.h"
#include "common/time.h"

namespace kiln::api {

using nlohmann::json;

namespace {

json WithPool(ApiContext& ctx, const store::SnapshotRecord& rec) {
  return SnapshotJson(rec, ctx.sandboxes.SnapshotPool(rec.id));
}

}  // namespace

void AddSnapshotRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/v1/sandboxes/{id}:snapshot", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    control::SnapshotOptions opts;
    if (auto v = f.String("name", contract::kSnapshotNameMax)) opts.name = *v;
    if (auto v = ReadLabels(f)) opts.labels = *v;
    opts.retention_days = static_cast<int>(f.Int("retentionDays", contract::kRetentionDays));
    if (auto mode = f.String("mode", 16)) {
      if (auto parsed = store::ParseSnapshotMode(*mode))
        opts.mode = *parsed;
      else
        f.Issue("mode",
                "must be \"memory\" (files, memory and processes) or \"disk\" (files only)");
    }
    f.Finish();
    auto rec = ValueOrThrow(ctx.sandboxes.Snapshot(s, opts));
    ex.SendJson(200, WithPool(ctx, rec));
  });

  r.Add("GET", "/v1/snapshots", [&ctx](Exchange& ex) {
    auto source = ex.Query("sandboxId");
    auto name = ex.Query("name");
    json data = json::array();
    auto scope = OwnerScope(ex);
    for (const auto& rec : ctx.sandboxes.ListSnapshots()) {
      if (scope && rec.owner != *scope) continue;
      if (source && rec.source_sandbox_id != *source) continue;
      if (name && (!rec.name || *rec.name != *name)) continue;
      data.push_back(WithPool(ctx, rec));
    }
    ex.SendJson(200, json{{"data", data}, {"nextCursor", nullptr}});
  });

  r.Add("GET", "/v1/snapshots/{id}", [&ctx](Exchange& ex) {
    ex.SendJson(200, WithPool(ctx, FindSnapshot(ctx, ex, ex.params["id"])));
  });

  r.Add("POST", "/v1/snapshots/{id}:pool", [&ctx](Exchange& ex) {
    auto rec = FindSnapshot(ctx, ex, ex.params["id"]);
    json body = ex.JsonBody();
    FieldReader f(body);
    std::optional<int> size = ReadPoolSize(f);
    f.Finish();
    ctx.sandboxes.ResizePool(rec.id, size);
    ex.SendJson(200, WithPool(ctx, rec));
  });

  r.Add("POST", "/v1/snapshots/{id}:delete", [&ctx](Exchange& ex) {
    FieldReader(ex.JsonBody()).Finish();
    auto rec = FindSnapshot(ctx, ex, ex.params["id"]);
    ctx.sandboxes.DeleteSnapshot(rec.id);
    ex.SendJson(200, DeletedSnapshotJson(rec, NowMs()));
  });

  r.Add("POST", "/v1/sandboxes/{id}:fork", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    control::ForkOptions opts;
    opts.count = static_cast<int>(f.Int("count", contract::kForkCount));
    opts.labels = ReadLabels(f).value_or(std::map<std::string, std::string>{});
    opts.keep_snapshot = f.Bool("keepSnapshot").value_or(false);
    if (auto name = f.String("name", contract::kSandboxNameMax)) {
      if (!ValidSandboxName(*name))
        f.Issue("name", "may hold only letters, digits, '.', '_' and '-'");
      opts.name = *name;
    }
    f.String("funding", 16);  // accepted: a local daemon has no trial
    opts.network = ReadNetworkField(f);
    f.Finish();
    control::ForkResult forked =
        ValueOrThrow(ctx.launcher.Fork(s, opts, PreferWaitDeadline(ex), PayerOf(ex)));
    json list = json::array();
    for (const auto& c : forked.copies) list.push_back(SandboxJson(*c));
    if (!forked.status.ok()) {
      // Name the copies that did start, so the caller can use or stop them.
      json details = {{"started", list}, {"requested", opts.count}};
      throw ApiError(Status(forked.status.code(),
                            forked.status.message() + " (" + std::to_string(forked.copies.size()) +
                                " of " + std::to_string(opts.count) + " copies started)",
                            details)
                         .WithRetryAfter(forked.status.retry_after_s()));
    }
    json answer{{"sandboxes", list}};
    // The snapshot a keepSnapshot fork kept, for the caller to use or delete.
    if (forked.kept) answer["snapshot"] = WithPool(ctx, *forked.kept);
    ex.SendJson(200, answer);
  });
}

}  // namespace kiln::api
