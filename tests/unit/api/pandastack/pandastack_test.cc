// The PandaStack front's pure mapping (src/api/pandastack/pandastack.h): bodies read
// into kiln's requests, kiln's objects in PandaStack's shapes, its errors.
#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/pandastack/pandastack.h"
#include "common/contract.h"
#include "unit/support/api_issue_paths.h"

namespace kiln::api::pandastack {
namespace pandastack_test {
namespace {

using nlohmann::json;

// The field paths an ApiError names.
TEST(PandaStackTest, CreateMapsFieldsOntoTheSpec) {
  CreateRequest r = ReadCreate(json::parse(R"({"template": "base", "ttl_seconds": 600,
      "persistent": true, "metadata": {"team": "rl"}, "cpu": 1, "memory_mb": 512})"));
  EXPECT_EQ(r.template_name, "base");
  EXPECT_EQ(r.spec.timeout_seconds, 600);
  EXPECT_TRUE(r.spec.persistent);
  EXPECT_EQ(r.spec.labels.at("team"), "rl");
  EXPECT_EQ(r.spec.shape.vcpu, 1);
  EXPECT_EQ(r.spec.shape.memory_mib, 512);
  EXPECT_FALSE(r.spec.snapshot);
}

TEST(PandaStackTest, CreateDefaultsAreKilns) {
  CreateRequest r = ReadCreate(json{{"template", "code-interpreter"}});
  EXPECT_EQ(r.spec.shape.vcpu, contract::kVcpu.def);
  EXPECT_EQ(r.spec.shape.memory_mib, contract::kMemoryMiB.def);
  EXPECT_EQ(r.spec.timeout_seconds, contract::kTimeoutSeconds.def);
  EXPECT_FALSE(r.spec.persistent);
  CreateRequest s = ReadCreate(json{{"template", "base"}, {"from_snapshot", "snap_1"}});
  EXPECT_EQ(s.spec.snapshot, "snap_1");
}

TEST(PandaStackTest, CreateIssuesNameTheField) {
  try {
    ReadCreate(json::parse(R"({"ttl_seconds": 5, "metadata": {"k": 1}, "colour": "red"})"));
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status().code(), Code::kInvalidRequest);
    auto paths = IssuePaths(e);
    for (const char* p : {"body.template", "body.ttl_seconds", "body.metadata.k", "body.colour"})
      EXPECT_NE(std::find(paths.begin(), paths.end(), p), paths.end()) << p << " " << e.what();
  }
}

TEST(PandaStackTest, VolumesAreRefusedAsAFeature) {
  try {
    ReadCreate(json::parse(R"({"template": "base", "volumes": [{"name": "v"}]})"));
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status().code(), Code::kNotSupported);
    EXPECT_EQ(e.status().details().value("feature", ""), "volumes");
  }
}

TEST(PandaStackTest, ExecIsAShellLineWithSecondsTimeout) {
  ExecRequest r = ReadExec(json{{"cmd", "echo hi"}, {"timeout_seconds", 5}});
  EXPECT_EQ(r.command.command, "echo hi");
  EXPECT_FALSE(r.command.argv);
  EXPECT_TRUE(r.command.env.empty());  // io puts the sandbox's under it
  EXPECT_EQ(r.options.timeout_ms, 5000);
  EXPECT_EQ(ReadExec(json{{"cmd", "true"}}).options.timeout_ms, contract::kExecTimeoutMs.def);
  EXPECT_THROW(ReadExec(json::object()), ApiError);
  EXPECT_THROW(ReadExec(json{{"cmd", "true"}, {"timeout_seconds", 0}}), ApiError);
  EXPECT_THROW(ReadExec(json{{"cmd", ""}}), ApiError);
}

TEST(PandaStackTest, LifecycleAndForkBodies) {
  EXPECT_EQ(ReadLifecycle(json{{"ttl_seconds", 900}}).ttl_seconds, 900);
  EXPECT_EQ(ReadLifecycle(json{{"persistent", true}}).persistent, true);
  EXPECT_THROW(ReadLifecycle(json::object()), ApiError);
  EXPECT_EQ(ReadFork(json::object(), false).count, 1);
  ForkRequest t = ReadFork(json{{"count", 3}, {"metadata", {{"k", "v"}}}}, true);
  EXPECT_EQ(t.count, 3);
  EXPECT_EQ(t.metadata->at("k"), "v");
  EXPECT_THROW(ReadFork(json::object(), true), ApiError);       // count required
  EXPECT_THROW(ReadFork(json{{"count", 2}}, false), ApiError);  // a fork has no count
  EXPECT_THROW(ReadFork(json{{"count", 11}}, true), ApiError);  // kiln's fork bound
}

control::SandboxRecord Record() {
  control::SandboxRecord r;
  r.id = "sb1";
  r.spec.shape.vcpu = 1;
  r.spec.shape.memory_mib = 512;
  r.spec.labels = {{"team", "rl"}};
  r.spec.persistent = true;
  r.spec.timeout_seconds = 300;
  r.state = control::SandboxState::kRunning;
  r.created_ms = 1000;
  r.ready_ms = 1250;
  r.expires_ms = 301000;
  return r;
}

TEST(PandaStackTest, SandboxShape) {
  json j = SandboxJson(Record(), SandboxExtras{"base", std::string("snap_1")});
  EXPECT_EQ(j["id"], "sb1");
  EXPECT_EQ(j["template"], "base");
  EXPECT_EQ(j["cpu"], 1);
  EXPECT_EQ(j["memory_mb"], 512);
  EXPECT_EQ(j["status"], "running");
  EXPECT_EQ(j["metadata"], json({{"team", "rl"}}));
  EXPECT_EQ(j["from_snapshot"], "snap_1");
  EXPECT_EQ(j["boot_ms"], 250);
  EXPECT_EQ(j["boot_mode"], "cold");
  EXPECT_EQ(j["persistent"], true);
  EXPECT_EQ(j["created_at"], "1970-01-01T00:00:01.000Z");
  EXPECT_TRUE(j["guest_ip"].is_null());
  EXPECT_EQ(StatusName(control::SandboxState::kPaused), "paused");
}

TEST(PandaStackTest, LifecycleIsTheLeaseLeft) {
  control::SandboxRecord r = Record();
  json j = LifecycleJson(r, 101000);
  EXPECT_EQ(j["ttl_seconds"], 200);
  EXPECT_EQ(j["persistent"], true);
  EXPECT_EQ(j["on_lease_end"], "pause");
  r.state = control::SandboxState::kPaused;
  r.paused_lease_ms = 42500;  // the clock stops while paused
  j = LifecycleJson(r, 999999999);
  EXPECT_EQ(j["ttl_seconds"], 43);
  EXPECT_TRUE(j["expires_at"].is_null());
}

TEST(PandaStackTest, FilesSnapshotsTemplates) {
  io::FileEntry e;
  e.name = "a";
  e.path = "/w/a";
  e.type = io::FileType::kDirectory;
  e.size = 4096;
  e.mode = "755";
  e.modified_ms = 5500;
  EXPECT_EQ(FileInfoJson(e), json::parse(R"({"name": "a", "path": "/w/a", "is_dir": true,
      "size": 4096, "mode": "755", "mtime": 5})"));
  store::SnapshotRecord s;
  s.id = "snap_1";
  s.source_sandbox_id = "sb1";
  s.size_bytes = 10;
  json sj = SnapshotJson(s, "base");
  EXPECT_EQ(sj["id"], "snap_1");
  EXPECT_EQ(sj["snapshot_id"], "snap_1");
  EXPECT_EQ(sj["sandbox_id"], "sb1");
  EXPECT_EQ(sj["size_bytes"], 10);
  images::ImageRecord image;
  image.id = "img_1";
  image.name = "base";
  image.source = images::ImageSource::kBuiltin;
  image.size_bytes = 7;
  json t = TemplateJson(image);
  EXPECT_EQ(t["name"], "base");
  EXPECT_EQ(t["is_global"], true);
  EXPECT_EQ(t["size_bytes"], 7);
}

TEST(PandaStackTest, ErrorsInPandaStacksShape) {
  json b = ErrorBody(Status(Code::kNotFound, "sandbox x not found"));
  EXPECT_EQ(b["error"], "sandbox x not found");  // the client shows `error`
  EXPECT_EQ(b["code"], "not_found");
  EXPECT_EQ(HttpStatus(Code::kNotFound), 404);
  EXPECT_EQ(HttpStatus(Code::kNoCapacity), 503);  // the client retries creates on 503
  EXPECT_EQ(HttpStatus(Code::kNotSupported), 501);
  EXPECT_EQ(HttpStatus(Code::kInvalidRequest), 400);
  json r = ErrorBody(Status(Code::kNoCapacity, "full").WithRetryAfter(3));
  EXPECT_EQ(r["retry_after_seconds"], 3);
}

TEST(PandaStackTest, RefusalsNameTheFeature) {
  struct Case {
    const char* method;
    const char* path;
    const char* feature;
  } cases[] = {
      {"GET", "/pandastack/v1/apps", "apps"},
      {"POST", "/pandastack/v1/databases", "databases"},
      {"POST", "/pandastack/v1/sandboxes/sb1/repl/sessions", "code contexts"},
      {"POST", "/pandastack/v1/templates/build", "template builds"},
      {"GET", "/pandastack/v1/schedules", "schedules"},
      {"POST", "/pandastack/v1/functions/f/invoke", "functions"},
      {"GET", "/pandastack/v1/nothing", "this route"},
  };
  for (const auto& c : cases) {
    Status s = Unsupported(c.method, c.path);
    EXPECT_EQ(s.code(), Code::kNotSupported) << c.path;
    EXPECT_EQ(s.details().value("feature", ""), c.feature) << c.path;
    EXPECT_NE(s.message().find(c.path), std::string::npos) << s.message();
    EXPECT_EQ(ErrorBody(s)["feature"], c.feature);
  }
}

}  // namespace
}  // namespace pandastack_test
}  // namespace kiln::api::pandastack
