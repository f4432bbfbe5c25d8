// Image records (src/images/manager/image_record.h): the stored JSON of each
// stage of an image's life, as kilnd has written it, reads back and is
// written again unchanged; older records take defaults; ImageInfo renders
// from the typed record.
#include "images/manager/image_record.h"

#include <gtest/gtest.h>

#include "api/kiln/presenters.h"
#include "common/time.h"

namespace kiln::images {
namespace images_record_test {
namespace {

using nlohmann::json;

constexpr const char* kLayer = "1111111111111111111111111111111111111111111111111111111111111111";

// A queued build, as Submit stores it (with the catalog's version and tags).
json Queued() {
  return json{{"id", "0f0e0d0c-0000-4000-8000-000000000001"},
              {"kind", "image"},
              {"owner", "key_1"},
              {"name", "web"},
              {"version", 3},
              {"tags", json::array()},
              {"state", "queued"},
              {"source", "dockerfile"},
              {"ref", nullptr},
              {"digest", nullptr},
              {"sizeBytes", 0},
              {"stepsTotal", 4},
              {"stepsCached", 0},
              {"config", nullptr},
              {"start",
               {{"cwd", nullptr},
                {"env", {{"A", "1"}}},
                {"readyTimeoutSeconds", 30},
                {"argv", {"python3", "-m", "http.server"}},
                {"readyPort", 8000}}},
              {"sudo", false},
              {"build",
               {{"vcpu", 2},
                {"memoryMiB", 2048},
                {"diskMiB", 4096},
                {"maxImageMiB", 8192},
                {"timeoutSeconds", 600}}},
              {"labels", {{"team", "a"}}},
              {"error", nullptr},
              {"pendingTags", {"latest", "v1"}},
              {"createdMs", 1700000000000}};
}

// The same build once ready, warmed and tagged.
json Ready() {
  json r = Queued();
  r["state"] = "ready";
  r["tags"] = {"latest", "v1"};
  r.erase("pendingTags");
  r["startedMs"] = 1700000001000;
  r["layers"] = {kLayer, "base-0123456789abcdef"};
  r["chainId"] = "2222222222222222222222222222222222222222222222222222222222222222";
  r["config"] = {{"user", "app"},
                 {"workdir", "/srv"},
                 {"env", {{"PATH", "/usr/bin:/bin"}, {"EMPTY", ""}}},
                 {"cmd", {"serve"}},
                 {"entrypoint", nullptr},
                 {"exposedPorts", {"8000/tcp"}},
                 {"labels", {{"org", "x"}}},
                 {"stopSignal", "SIGTERM"}};
  r["runAs"] = {{"uid", 1234},    {"gid", 1234},       {"user", "app"},
                {"home", "/srv"}, {"workdir", "/srv"}, {"env", {"PATH=/usr/bin:/bin"}}};
  r["sizeBytes"] = uint64_t{5} << 30;  // past 32 bits
  r["stepsTotal"] = 4;
  r["stepsCached"] = 1;
  r["stepsRun"] = 3;
  r["digest"] = "sha256:3333333333333333333333333333333333333333333333333333333333333333";
  r["warmSnapshot"] = "snap_warm";
  r["warm"] = {{"processId", "p1"}, {"readyMs", 120}, {"state", "ready"}, {"snapshotBytes", 99}};
  r["readyMs"] = 1700000009000;
  r["endedMs"] = 1700000009000;
  return r;
}

TEST(ImageRecordTest, StateNamesAreTheApis) {
  for (auto s : {ImageState::kQueued, ImageState::kBuilding, ImageState::kReady,
                 ImageState::kFailed, ImageState::kDeleting, ImageState::kDeleted})
    EXPECT_EQ(ParseImageState(ImageStateName(s)), s);
  EXPECT_EQ(ImageStateName(ImageState::kBuilding), "building");
  EXPECT_EQ(ParseImageState("Ready"), std::nullopt);
  for (auto s :
       {ImageSource::kRecipe, ImageSource::kDockerfile, ImageSource::kImage, ImageSource::kBuiltin})
    EXPECT_EQ(ParseImageSource(SourceName(s)), s);
  EXPECT_EQ(ParseImageSource("git"), std::nullopt);
}

TEST(ImageRecordTest, EachStageReadsBackAndIsWrittenAgainUnchanged) {
  json failed = Queued();
  failed["state"] = "failed";
  failed.erase("pendingTags");
  failed["error"] = {
      {"code", "step_failed"}, {"message", "exit 1"}, {"step", 2}, {"logTail", {"boom"}}};
  failed["endedMs"] = 1700000002000;
  json deleted = Ready();
  deleted["state"] = "deleted";
  deleted["tags"] = json::array();
  json pulled = Queued();
  pulled["source"] = "image";
  pulled["ref"] = "docker.io/library/python:3.12";
  pulled["start"] = nullptr;
  for (const json& stored : {Queued(), Ready(), failed, deleted, pulled}) {
    ImageRecord r = stored.get<ImageRecord>();
    EXPECT_EQ(json(r), stored) << stored.dump();
  }
  ImageRecord ready = Ready().get<ImageRecord>();
  EXPECT_EQ(ready.state, ImageState::kReady);
  ASSERT_EQ(ready.layers.size(), 2u);
  EXPECT_TRUE(ready.layers[1].builtin());
  EXPECT_EQ(ready.size_bytes, uint64_t{5} << 30);
  ASSERT_TRUE(ready.config);
  EXPECT_EQ(ready.config->working_dir, "/srv");
  ASSERT_TRUE(ready.start && ready.start->ready_port);
  EXPECT_EQ(*ready.start->ready_port, 8000);
  EXPECT_EQ(ready.warm_snapshot, "snap_warm");
  EXPECT_FALSE(ready.sudo);
}

TEST(ImageRecordTest, OlderRecordsTakeDefaults) {
  // The built-in image's record has no sudo; a build not yet run has no
  // layers, runAs or stepsRun.
  ImageRecord r = json{{"id", "i1"}, {"state", "building"}}.get<ImageRecord>();
  EXPECT_EQ(r.state, ImageState::kBuilding);
  EXPECT_TRUE(r.sudo);
  EXPECT_FALSE(r.build);
  EXPECT_FALSE(r.run_as);
  EXPECT_FALSE(r.steps_run);
  EXPECT_TRUE(r.layers.empty());
  EXPECT_TRUE(r.chain_id.empty());
  EXPECT_TRUE(r.error.is_null());
  EXPECT_EQ(r.ready_ms, 0);
  json written = r;
  EXPECT_FALSE(written.contains("layers"));
  EXPECT_FALSE(written.contains("readyMs"));
  EXPECT_EQ(written["sudo"], true);
  EXPECT_THROW(json({{"state", "ready"}}).get<ImageRecord>(), json::exception);
  EXPECT_THROW((json{{"id", "i1"}, {"layers", {"../x"}}}.get<ImageRecord>()), json::exception);
}

TEST(ImageRecordTest, ImageInfoRendersFromTheRecord) {
  ImageRecord r = Ready().get<ImageRecord>();
  control::PoolStatus pool;
  pool.size = 2;
  pool.ready = 1;
  json info = api::v1::ImageJson(r, pool);
  json expected{{"id", "0f0e0d0c-0000-4000-8000-000000000001"},
                {"kind", "image"},
                {"name", "web"},
                {"version", 3},
                {"tags", {"latest", "v1"}},
                {"labels", {{"team", "a"}}},
                {"state", "ready"},
                {"source", "dockerfile"},
                {"ref", nullptr},
                {"digest", Ready()["digest"]},
                {"sizeBytes", uint64_t{5} << 30},
                {"layers", 2},
                {"stepsTotal", 4},
                {"stepsCached", 1},
                {"stepsRun", 3},
                {"config", Ready()["config"]},
                {"start", Ready()["start"]},
                {"sudo", false},
                {"build", Ready()["build"]},
                {"pool",
                 {{"size", 2},
                  {"ready", 1},
                  {"memoryBytes", 0},
                  {"mode", "auto"},
                  {"wanted", 0},
                  {"unfilledReason", nullptr}}},
                {"warm", true},
                {"error", nullptr},
                {"createdAt", FormatTime(1700000000000)},
                {"readyAt", FormatTime(1700000009000)},
                {"endedAt", FormatTime(1700000009000)}};
  EXPECT_EQ(info, expected);
  // An unnamed image's name is its id, shown as null; a queued one has no
  // layers, config or times yet.
  ImageRecord q = Queued().get<ImageRecord>();
  q.name = q.id;
  json queued = api::v1::ImageJson(q, control::PoolStatus{});
  EXPECT_TRUE(queued["name"].is_null());
  EXPECT_EQ(queued["layers"], 0);
  EXPECT_EQ(queued["stepsRun"], 0);
  EXPECT_TRUE(queued["config"].is_null());
  EXPECT_TRUE(queued["readyAt"].is_null());
  EXPECT_EQ(queued["warm"], false);
}

}  // namespace
}  // namespace images_record_test
}  // namespace kiln::images
