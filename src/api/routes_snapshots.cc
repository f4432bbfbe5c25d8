// Snapshots and forks: POST /v1/sandboxes/{id}:snapshot, GET /v1/snapshots,
// GET /v1/snapshots/{id}, POST /v1/snapshots/{id}:delete,
// POST /v1/sandboxes/{id}:fork.
#include "api/errors.h"
#include "api/routes.h"
#include "api/validate.h"
#include "common/time.h"

namespace kiln::api {

using nlohmann::json;

namespace {

json WithPool(ApiContext& ctx, const store::SnapshotRecord& rec) {
  json out = rec.ToJson();
  auto p = ctx.sandboxes.pool().Status(rec.id);
  out["pool"] = {{"size", p.size}, {"ready", p.ready}, {"memoryBytes", p.memory_bytes}};
  return out;
}

}  // namespace

void AddSnapshotRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/v1/sandboxes/{id}:snapshot", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    control::SnapshotOptions opts;
    if (auto v = f.String("name", 128)) opts.name = *v;
    if (auto v = f.StringMap("labels", 32, 63, 256)) opts.labels = *v;
    if (auto v = f.Int("retentionDays", 1, 365)) opts.retention_days = static_cast<int>(*v);
    if (auto mode = f.String("mode", 16); mode && *mode != "memory")
      f.Issue("mode", "only \"memory\" snapshots (files, memory and processes) are supported");
    f.Finish();
    control::Failure failure;
    auto rec = ctx.sandboxes.Snapshot(s, opts, &failure);
    if (!rec) throw FromFailure(failure);
    ex.SendJson(200, WithPool(ctx, *rec));
  });

  r.Add("GET", "/v1/snapshots", [&ctx](Exchange& ex) {
    auto source = ex.Query("sandboxId");
    auto name = ex.Query("name");
    json data = json::array();
    auto scope = OwnerScope(ex);
    for (const auto& rec : ctx.sandboxes.snapshots().List()) {
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
    auto size = f.Int("size", 0, 64);
    if (!size && !f.has("size")) f.Issue("size", "is required");
    f.Finish();
    ctx.sandboxes.pool().Resize(rec.id, static_cast<int>(*size));
    ex.SendJson(200, WithPool(ctx, rec));
  });

  r.Add("POST", "/v1/snapshots/{id}:delete", [&ctx](Exchange& ex) {
    FieldReader(ex.JsonBody()).Finish();
    auto rec = FindSnapshot(ctx, ex, ex.params["id"]);
    ctx.sandboxes.DeleteSnapshot(rec.id);
    json out = rec.ToJson();
    out["state"] = "deleted";
    out["status"] = "deleted";
    out["deletedAt"] = FormatTime(NowMs());
    ex.SendJson(200, out);
  });

  r.Add("POST", "/v1/sandboxes/{id}:fork", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    int count = static_cast<int>(f.Int("count", 1, 10).value_or(1));
    auto labels = f.StringMap("labels", 32, 63, 256).value_or(std::map<std::string, std::string>{});
    bool keep = f.Bool("keepSnapshot").value_or(false);
    auto network = ReadNetworkField(f);
    f.Finish();
    control::Failure failure;
    auto copies =
        ctx.sandboxes.Fork(s, count, labels, keep, PreferWaitDeadline(ex), &failure, network);
    json list = json::array();
    for (const auto& c : copies) list.push_back(c->Info());
    if (static_cast<int>(copies.size()) < count) {
      // Name the copies that did start, so the caller can use or stop them.
      json details = {{"started", list}, {"requested", count}};
      throw ApiError(failure.status, failure.code,
                     failure.message + " (" + std::to_string(copies.size()) + " of " +
                         std::to_string(count) + " copies started)",
                     details);
    }
    ex.SendJson(200, json{{"sandboxes", list}});
  });
}

}  // namespace kiln::api
