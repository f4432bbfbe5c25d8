// Daytona's snapshots under /daytona/snapshots (see daytona.h). A Daytona
// snapshot is an image in Daytona's sense, not a running sandbox kept: a
// kiln image of the key's, named as the snapshot. Its create builds one
// (from `imageName`, or a Dockerfile in `buildInfo`) through kiln's own
// builder; the SDK polls until `active`. Volumes, which kiln lacks, are
// refused here by name.
#include "api/auth.h"
#include "api/daytona/daytona.h"
#include "api/errors.h"
#include "api/validate.h"
#include "common/time.h"
#include "images/manager/image_manager.h"

namespace kiln::api::daytona {

using nlohmann::json;

namespace {

constexpr int kDefaultPage = 100;

images::ImageManager& Images(ApiContext& ctx) {
  if (!ctx.images) throw ApiError(Unsupported("snapshots", "this kilnd serves no images"));
  return *ctx.images;
}

// Daytona's word for where a kiln image's build is.
std::string SnapshotState(images::ImageState state) {
  switch (state) {
    case images::ImageState::kQueued:
      return "pending";
    case images::ImageState::kBuilding:
      return "building";
    case images::ImageState::kReady:
      return "active";
    case images::ImageState::kFailed:
      return "build_failed";
    case images::ImageState::kDeleting:
    case images::ImageState::kDeleted:
      return "removing";
  }
  return "error";
}

json SnapshotJson(const images::ImageRecord& r) {
  Shape shape = r.shape.value_or(Shape{});
  json out{{"id", r.id},
           {"organizationId", r.owner},
           {"general", r.source == images::ImageSource::kBuiltin},
           {"name", r.name},
           {"imageName", r.ref.value_or(r.name)},
           {"state", SnapshotState(r.state)},
           {"size", static_cast<double>(r.size_bytes) / (1024.0 * 1024 * 1024)},
           {"entrypoint", nullptr},
           {"cpu", shape.vcpu},
           {"gpu", 0},
           {"mem", (shape.memory_mib + 1023) / 1024},
           {"disk", (shape.disk_mib + 1023) / 1024},
           {"createdAt", FormatTime(r.created_ms)},
           {"updatedAt", FormatTime(std::max({r.created_ms, r.started_ms, r.ended_ms}))},
           {"lastUsedAt", nullptr}};
  out["errorReason"] = r.error.is_object() ? json(r.error.value("message", "failed")) : json();
  return out;
}

// POST /snapshots: {name, imageName | buildInfo, entrypoint?, cpu?,
// memory?, disk?, gpu?, regionId?}.
images::ImageRequest ReadSnapshotCreate(const json& body, const std::string& owner) {
  FieldReader f(body);
  images::ImageRequest req;
  req.owner = owner;
  req.source = images::ImageSource::kDockerfile;
  auto name = f.String("name", contract::kSnapshotNameMax);
  if (!name || name->empty()) f.Issue("name", "is required: the snapshot's name");
  req.name = name.value_or("");
  std::string dockerfile;
  if (auto image = f.String("imageName", 512)) dockerfile = "FROM " + *image + "\n";
  if (auto entrypoint = f.StringList("entrypoint", 64); entrypoint && !entrypoint->empty())
    dockerfile += "ENTRYPOINT " + json(*entrypoint).dump() + "\n";
  if (const json* build = f.Raw("buildInfo")) {
    FieldReader b(*build, "body.buildInfo");
    auto text = b.String("dockerfileContent", 1 << 20);
    if (!text) b.Issue("dockerfileContent", "is required: the Dockerfile's text");
    auto hashes = b.StringList("contextHashes", 256);
    b.Finish();
    if (hashes && !hashes->empty())
      throw ApiError(Unsupported("build contexts (COPY of local files)",
                                 "kiln's Daytona front has no object storage yet; build the "
                                 "image with POST /v1/images"));
    if (!dockerfile.empty()) f.Issue("imageName", "a snapshot names an image or a buildInfo");
    dockerfile = text.value_or("");
  }
  if (dockerfile.empty()) f.Issue("imageName", "is required without a buildInfo");
  req.dockerfile = dockerfile;
  Shape shape;
  shape.vcpu = static_cast<int>(f.Int("cpu", contract::kVcpu));
  shape.memory_mib = static_cast<int>(f.Int("memory", 1, contract::kMemoryMiB.max / 1024)
                                          .value_or(contract::kMemoryMiB.def / 1024) *
                                      1024);
  shape.disk_mib = static_cast<int>(
      f.Int("disk", 1, contract::kDiskMiB.max / 1024).value_or(contract::kDiskMiB.def / 1024) *
      1024);
  req.shape = shape;
  if (auto gpu = f.Int("gpu", 0, 64); gpu && *gpu > 0)
    throw ApiError(Unsupported("gpu", "kiln sandboxes have no GPUs"));
  (void)f.Raw("gpuType");
  (void)f.String("regionId", 64);
  (void)f.String("sandboxClass", 32);
  f.Finish();
  // RUN steps reach the internet, as Daytona's builds do.
  req.network.internet = true;
  return req;
}

images::ImageRecord FindDaytonaSnapshot(ApiContext& ctx, Exchange& ex) {
  return ValueOrThrow(Images(ctx).Resolve(ex.params["id"], OwnerScope(ex)));
}

void CreateSnapshot(ApiContext& ctx, Exchange& ex) {
  std::string owner = CallerOf(ex).key_id;  // an admin's snapshot is its own too
  images::ImageRecord made =
      ValueOrThrow(Images(ctx).Submit(ReadSnapshotCreate(ex.JsonBody(), owner)));
  ex.SendJson(200, SnapshotJson(made));
}

void ListSnapshots(ApiContext& ctx, Exchange& ex) {
  int64_t page = QueryInt(ex, "page", 1, 1 << 20, 1);
  int64_t limit = QueryInt(ex, "limit", 1, 1000, kDefaultPage);
  std::vector<images::ImageRecord> all =
      Images(ctx).List(OwnerScope(ex), std::nullopt, std::nullopt);
  json items = json::array();
  for (size_t i = static_cast<size_t>((page - 1) * limit);
       i < all.size() && items.size() < static_cast<size_t>(limit); ++i)
    items.push_back(SnapshotJson(all[i]));
  int64_t total = static_cast<int64_t>(all.size());
  ex.SendJson(200, json{{"items", items},
                        {"total", total},
                        {"page", page},
                        {"totalPages", (total + limit - 1) / limit}});
}

}  // namespace

void AddSnapshotRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/daytona/snapshots", [&ctx](Exchange& ex) { CreateSnapshot(ctx, ex); });
  r.Add("GET", "/daytona/snapshots", [&ctx](Exchange& ex) { ListSnapshots(ctx, ex); });
  r.Add("GET", "/daytona/snapshots/{id}",
        [&ctx](Exchange& ex) { ex.SendJson(200, SnapshotJson(FindDaytonaSnapshot(ctx, ex))); });
  r.Add("POST", "/daytona/snapshots/{id}/activate",
        [&ctx](Exchange& ex) { ex.SendJson(200, SnapshotJson(FindDaytonaSnapshot(ctx, ex))); });
  r.Add("DELETE", "/daytona/snapshots/{id}", [&ctx](Exchange& ex) {
    images::ImageRecord found = FindDaytonaSnapshot(ctx, ex);
    if (found.source == images::ImageSource::kBuiltin)
      throw ApiError(Code::kForbidden, "kiln's built-in image cannot be deleted");
    ValueOrThrow(Images(ctx).Delete(found.id, OwnerScope(ex)));
    ex.SendBytes(200, "", "text/plain");
  });
  // Volumes: the next issue's. Until then every call says so.
  auto volumes = [](Exchange&) {
    throw ApiError(Unsupported("volumes",
                               "kiln has no volumes yet; keep data in a snapshot or "
                               "an image"));
  };
  r.Add("*", "/daytona/volumes", volumes);
  r.Add("*", "/daytona/volumes/{rest...}", volumes);
}

}  // namespace kiln::api::daytona
