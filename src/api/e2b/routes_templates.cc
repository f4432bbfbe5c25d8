// E2B's templates and snapshots, on kiln's images and snapshots: a
// template is a kiln image (E2B's `base` is kiln's built-in one), a
// snapshot is a kiln snapshot. Builds: routes_template_builds.cc.
#include <set>

#include "api/auth.h"
#include "api/e2b/e2b.h"
#include "api/e2b/routes.h"
#include "api/e2b/templates.h"
#include "api/errors.h"
#include "api/validate.h"
#include "common/contract.h"
#include "images/manager/image_manager.h"

namespace kiln::api::e2b {

using nlohmann::json;

namespace template_routes {
namespace {

images::ImageRecord FindTemplate(ApiContext& ctx, Exchange& ex, const std::string& name) {
  if (!ctx.images) throw ApiError(Code::kNotFound, "this kilnd serves no templates");
  auto rec = ctx.images->Resolve(name, OwnerScope(ex));
  if (!rec.ok())
    throw ApiError(Code::kNotFound, "template '" + name + "' was not found",
                   json{{"templateID", name}});
  return *rec;
}

// The key's snapshots E2B's clients may see, newest first.
std::vector<store::SnapshotRecord> VisibleSnapshots(ApiContext& ctx, const Exchange& ex) {
  auto all = ctx.sandboxes.snapshots().ListVisible(OwnerScope(ex), control::SnapshotUse::kTaken);
  return {all.rbegin(), all.rend()};
}

}  // namespace
}  // namespace template_routes

void AddTemplateRoutes(Router& r, ApiContext& ctx) {
  using template_routes::FindTemplate;
  using template_routes::VisibleSnapshots;
  r.Add("GET", "/e2b/templates", [&ctx](Exchange& ex) {
    json items = json::array();
    if (ctx.images) {
      // Every version of an image is one template: its name.
      std::set<std::string> seen;
      for (const auto& rec :
           ctx.images->List(OwnerScope(ex), std::nullopt, images::ImageState::kReady))
        if (seen.insert(rec.name).second) items.push_back(TemplateJson(rec));
    }
    ex.SendJson(200, items);
  });

  r.Add("GET", "/e2b/templates/aliases/{alias}", [&ctx](Exchange& ex) {
    auto rec = FindTemplate(ctx, ex, ex.params["alias"]);
    ex.SendJson(200, json{{"templateID", rec.name},
                          {"public", rec.source == images::ImageSource::kBuiltin}});
  });

  r.Add("GET", "/e2b/templates/{id}", [&ctx](Exchange& ex) {
    images::ImageRecord rec = FindTemplate(ctx, ex, KilnTemplateRef(ex.params["id"]));
    json t = TemplateJson(rec);
    json builds = json::array();
    for (const auto& v : ctx.images->List(OwnerScope(ex), rec.name, std::nullopt))
      if (v.owner == rec.owner) builds.push_back(TemplateBuildJson(v));
    t["builds"] = builds;
    ex.SendJson(200, t);
  });

  // E2B's SDKs delete a snapshot as a template (delete_snapshot).
  r.Add("DELETE", "/e2b/templates/{id}", [&ctx](Exchange& ex) {
    const std::string& id = ex.params["id"];
    auto snap =
        ctx.sandboxes.snapshots().FindVisible(id, OwnerScope(ex), control::SnapshotUse::kRead);
    if (snap) {
      ctx.sandboxes.snapshots().Delete(snap->id);
      ex.SendBytes(204, "", "application/json");
      return;
    }
    // A template of the key's: every version of it goes (sandboxes
    // running one keep running; its layers stay while they do).
    std::vector<images::ImageRecord> versions = TemplateVersions(ctx, ex, KilnTemplateRef(id));
    if (versions.empty())
      throw ApiError(Code::kNotFound, "template '" + id + "' was not found",
                     json{{"templateID", id}});
    for (const auto& v : versions)
      if (v.state != images::ImageState::kDeleted)
        ValueOrThrow(ctx.images->Delete(v.id, CallerOf(ex).key_id));
    ex.SendBytes(204, "", "application/json");
  });

  r.Add("POST", "/e2b/sandboxes/{id}/snapshots", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    control::SnapshotOptions opts = ReadSnapshot(ex.JsonBody());
    ex.SendJson(201, SnapshotInfoJson(ValueOrThrow(ctx.sandboxes.Snapshot(s, opts))));
  });

  r.Add("GET", "/e2b/snapshots", [&ctx](Exchange& ex) {
    auto source = ex.Query("sandboxID");
    auto name = ex.Query("name");
    json list = json::array();
    for (const auto& rec : VisibleSnapshots(ctx, ex)) {
      if (source && rec.source_sandbox_id != *source) continue;
      if (name && rec.name != *name) continue;
      list.push_back(SnapshotInfoJson(rec));
    }
    ex.SendJson(200, list);
  });
}

}  // namespace kiln::api::e2b
