// The API's objects as src/api/kiln/presenters.h renders them.
#include <gtest/gtest.h>

#include "api/kiln/presenters.h"

namespace kiln::api::v1 {
namespace presenters_test {
namespace {

using nlohmann::json;

TEST(PresentersTest, ApiKey) {
  store::ApiKey k;
  k.id = "key_1";
  k.name = "n";
  k.created_ms = 0;
  EXPECT_EQ(ApiKeyJson(k), json::parse(R"({"id": "key_1", "name": "n", "admin": false,
      "dailyLimitMicros": null, "createdAt": "1970-01-01T00:00:00.000Z", "revokedAt": null})"));
  k.admin = true;
  k.daily_limit_micros = 0;
  k.revoked_ms = 1500;
  auto j = ApiKeyJson(k);
  EXPECT_EQ(j["admin"], true);
  EXPECT_EQ(j["dailyLimitMicros"], 0);
  EXPECT_EQ(j["revokedAt"], "1970-01-01T00:00:01.500Z");
}

control::SandboxRecord Running() {
  control::SandboxRecord r;
  r.id = "sb1";
  r.spec.owner = "key_1";
  r.spec.env = {{"B", "2"}, {"A", "1"}};
  r.spec.labels = {{"team", "rl"}};
  r.state = control::SandboxState::kRunning;
  r.created_ms = 1000;
  r.ready_ms = 1100;
  r.expires_ms = 1801000;
  r.meter.micros = 12.7;
  r.meter.cpu_seconds = 0.5;
  return r;
}

TEST(PresentersTest, SandboxHidesEnvValuesAndSpellsTheState) {
  json j = SandboxJson(Running());
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["envNames"], json::array({"A", "B"}));
  EXPECT_EQ(j.dump().find("\"1\""), std::string::npos);  // no env value leaks
  EXPECT_EQ(j["chargedMicros"], 12);
  EXPECT_EQ(j["readyAt"], "1970-01-01T00:00:01.100Z");
  EXPECT_TRUE(j["endedAt"].is_null());
  EXPECT_TRUE(j["stopReason"].is_null());
  EXPECT_TRUE(j["name"].is_null());
  EXPECT_EQ(j["funding"], "paid");  // Runtime's client reads info["funding"]
  EXPECT_EQ(j["region"], "local");
  EXPECT_EQ(j["network"],
            (json{{"internet", false}, {"allow", json::array()}, {"deny", json::array()}}));
}

TEST(PresentersTest, DeletedSandbox) {
  control::SandboxRecord r = Running();
  r.state = control::SandboxState::kStopped;
  r.ended_ms = 2000;
  json j = DeletedSandboxJson({r, 3000});
  EXPECT_EQ(j["status"], "deleted");
  EXPECT_EQ(j["state"], "stopped");
  EXPECT_EQ(j["deletedAt"], "1970-01-01T00:00:03.000Z");
  EXPECT_EQ(j["endedAt"], "1970-01-01T00:00:02.000Z");
}

TEST(PresentersTest, NetworkPolicyCarriesItsVersion) {
  control::SandboxRecord r = Running();
  r.network.internet = true;
  r.network.allow = {"example.com"};
  r.network_version = 3;
  r.network_updated_ms = 5000;
  json j = NetworkPolicyJson(r);
  EXPECT_EQ(j["sandboxId"], "sb1");
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["enforcedVersion"], 3);
  EXPECT_EQ(j["allow"], json::array({"example.com"}));
  EXPECT_EQ(j["updatedAt"], "1970-01-01T00:00:05.000Z");
}

TEST(PresentersTest, SnapshotWithPoolAndDeleted) {
  store::SnapshotRecord s;
  s.id = "snap1";
  s.shape = {1, 512, 1024};
  s.size_bytes = 42;
  s.created_ms = 0;
  s.expires_ms = 86400000;
  json j = SnapshotJson(s, control::PoolStatus{2, 1, 99});
  EXPECT_EQ(j["pool"], (json{{"size", 2},
                             {"ready", 1},
                             {"memoryBytes", 99},
                             {"mode", "auto"},
                             {"wanted", 0},
                             {"unfilledReason", nullptr}}));
  control::PoolStatus pinned{0, 0, 0, true, 3, "memory_budget"};
  EXPECT_EQ(SnapshotJson(s, pinned)["pool"]["mode"], "pinned");
  EXPECT_EQ(SnapshotJson(s, pinned)["pool"]["unfilledReason"], "memory_budget");
  EXPECT_EQ(j["shape"]["memoryMiB"], 512);
  EXPECT_EQ(j["state"], "ready");
  EXPECT_TRUE(j["network"].is_null());
  json d = DeletedSnapshotJson(s, 1000);
  EXPECT_FALSE(d.contains("pool"));
  EXPECT_EQ(d["state"], "deleted");
}

TEST(PresentersTest, FileEntryAndStat) {
  io::FileEntry e{.name = "a",
                  .path = "/w/a",
                  .type = io::FileType::kFile,
                  .size = 3,
                  .mode = "644",
                  .modified_ms = 1500,
                  .uid = 1000,
                  .gid = 1000};
  EXPECT_EQ(FileEntryJson(e), json::parse(R"({"name": "a", "path": "/w/a", "type": "file",
      "size": 3, "mode": "644", "modifiedAt": "1970-01-01T00:00:01.500Z", "uid": 1000,
      "gid": 1000})"));
  e.symlink_target = "/t";
  EXPECT_EQ(FileEntryJson(e)["symlinkTarget"], "/t");
  json present = FileStatJson(io::FileStat{.exists = true, .entry = e});
  EXPECT_EQ(present["exists"], true);
  EXPECT_EQ(present["modifiedAt"], "1970-01-01T00:00:01.500Z");
  EXPECT_EQ(FileStatJson(io::FileStat{.exists = false, .entry = {.path = "/gone"}}),
            (json{{"exists", false}, {"path", "/gone"}}));
}

TEST(PresentersTest, ProcessAndOutputPage) {
  io::ProcessInfo p{.id = "p1",
                    .seq = 1,
                    .pid = 7,
                    .state = io::ProcessState::kRunning,
                    .command = "sleep 1",
                    .argv = {"sleep", "1"},
                    .cwd = "/workspace",
                    .started_ms = 0};
  json j = ProcessJson(p);
  EXPECT_EQ(j["kind"], "process");
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["startedAt"], "1970-01-01T00:00:00.000Z");
  EXPECT_TRUE(j["endedAt"].is_null());
  EXPECT_TRUE(j["exitCode"].is_null());
  EXPECT_FALSE(j.contains("seq"));
  p.state = io::ProcessState::kExited;
  p.exit_code = 0;
  p.ended_ms = 2000;
  j = ProcessJson(p);
  EXPECT_EQ(j["exitCode"], 0);
  EXPECT_EQ(j["endedAt"], "1970-01-01T00:00:02.000Z");
  io::OutputPage page{
      .chunks = {{.offset = 4, .stream = io::OutputStream::kStderr, .data = "x\xff"}},
      .next_cursor = 6,
      .complete = true,
      .process = p};
  json out = OutputPageJson(page);
  EXPECT_EQ(out["chunks"][0], (json{{"offset", 4}, {"stream", "stderr"}, {"data", "x\ufffd"}}));
  EXPECT_EQ(out["state"], "exited");
  EXPECT_EQ(out["nextCursor"], 6);
}

}  // namespace
}  // namespace presenters_test
}  // namespace kiln::api::v1
