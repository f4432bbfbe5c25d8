// PandaStack's snapshots, fork, fork-tree and templates, on kiln's
// SandboxManager::Snapshot/Fork and ImageManager.
#include <set>

#include "api/errors.h"
#include "api/pandastack/routes.h"
#include "api/validate.h"
#include "common/contract.h"
#include "images/manager/image_manager.h"

namespace kiln::api::pandastack {

using nlohmann::json;

namespace {

json PresentSnapshot(ApiContext& ctx, const store::SnapshotRecord& rec) {
  return SnapshotJson(rec, TemplateName(ctx, rec.image, rec.owner));
}

// Forks `count` copies. PandaStack's client cannot see copies of a fork
// that failed part-way and resends it on a 503, so those copies are
// stopped before the refusal is answered.
std::vector<std::shared_ptr<control::Sandbox>> Fork(ApiContext& ctx, Exchange& ex, bool tree) {
  auto s = FindSandbox(ctx, ex);
  ForkRequest req = ReadFork(ex.JsonBody(), tree);
  control::ForkOptions opts;
  opts.count = req.count;
  // Copies keep the source's metadata unless given theirs, and name their
  // parent as PandaStack's forks do.
  opts.labels = req.metadata.value_or(s->spec().labels);
  if (opts.labels.size() < static_cast<size_t>(contract::kLabelsMax))
    opts.labels.emplace("fork_parent_id", s->id());
  control::ForkResult forked =
      ValueOrThrow(ctx.launcher.Fork(s, opts, CreateDeadline(ex), PayerOf(ex)));
  if (!forked.status.ok()) {
    for (const auto& c : forked.copies) ctx.sandboxes.Delete(c->id());
    throw ApiError(Status(forked.status.code(), forked.status.message() + " (the " +
                                                    std::to_string(forked.copies.size()) +
                                                    " copies that started were deleted)")
                       .WithRetryAfter(forked.status.retry_after_s()));
  }
  return forked.copies;
}

}  // namespace

void AddCopyRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/pandastack/v1/sandboxes/{id}/snapshots", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    control::SnapshotOptions opts = ReadSnapshot(ex.JsonBody());
    ex.SendJson(200, PresentSnapshot(ctx, ValueOrThrow(ctx.sandboxes.Snapshot(s, opts))));
  });

  r.Add("GET", "/pandastack/v1/snapshots", [&ctx](Exchange& ex) {
    auto source = ex.Query("sandbox_id");
    auto scope = OwnerScope(ex);
    json list = json::array();
    auto all = ctx.sandboxes.snapshots().ListVisible(scope, control::SnapshotUse::kTaken);
    for (auto it = all.rbegin(); it != all.rend(); ++it) {  // newest first
      if (source && it->source_sandbox_id != *source) continue;
      list.push_back(PresentSnapshot(ctx, *it));
    }
    ex.SendJson(200, json{{"snapshots", list}});
  });

  r.Add("GET", "/pandastack/v1/snapshots/{id}", [&ctx](Exchange& ex) {
    ex.SendJson(200, PresentSnapshot(ctx, FindSnapshot(ctx, ex, ex.params["id"])));
  });

  r.Add("DELETE", "/pandastack/v1/snapshots/{id}", [&ctx](Exchange& ex) {
    auto rec = FindSnapshot(ctx, ex, ex.params["id"]);
    ctx.sandboxes.snapshots().Delete(rec.id);
    ex.SendJson(200, json{{"id", rec.id}, {"status", "deleted"}});
  });

  r.Add("POST", "/pandastack/v1/sandboxes/{id}/fork", [&ctx](Exchange& ex) {
    auto copies = Fork(ctx, ex, false);
    ex.SendJson(200, json{{"sandbox", Present(ctx, *copies.at(0))}});
  });

  r.Add("POST", "/pandastack/v1/sandboxes/{id}/fork-tree", [&ctx](Exchange& ex) {
    auto copies = Fork(ctx, ex, true);
    json children = json::array();
    for (const auto& c : copies) children.push_back(Present(ctx, *c));
    ex.SendJson(200, json{{"parent_id", ex.params["id"]}, {"children", children}});
  });

  r.Add("GET", "/pandastack/v1/templates", [&ctx](Exchange& ex) {
    json items = json::array();
    if (ctx.images) {
      // Every version of an image is one template: its name.
      std::set<std::string> seen;
      for (const auto& rec :
           ctx.images->List(OwnerScope(ex), std::nullopt, images::ImageState::kReady)) {
        if (seen.insert(rec.name).second) items.push_back(TemplateJson(rec));
      }
    }
    ex.SendJson(200, json{{"items", items}});
  });

  r.Add("GET", "/pandastack/v1/templates/{name}", [&ctx](Exchange& ex) {
    // PandaStack's build list, not a template of that name.
    if (ex.params["name"] == "builds") throw ApiError(Unsupported(ex.method(), ex.path()));
    if (!ctx.images) throw ApiError(Code::kImageNotFound, "this kilnd serves no images");
    ex.SendJson(200,
                TemplateJson(ValueOrThrow(ctx.images->Resolve(ex.params["name"], OwnerScope(ex)))));
  });
}

}  // namespace kiln::api::pandastack
