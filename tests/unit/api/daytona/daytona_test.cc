// The Daytona front's pure mapping (src/api/daytona/daytona.h): bodies read
// into kiln's requests, kiln's sandboxes in Daytona's shape, its errors.
#include <gtest/gtest.h>

#include "api/daytona/daytona.h"
#include "api/errors.h"
#include "common/contract.h"
#include "unit/support/api_issue_paths.h"

namespace kiln::api::daytona {
namespace daytona_test {
namespace {

using nlohmann::json;

TEST(DaytonaTest, CreateMapsFieldsOntoTheSpec) {
  CreateRequest r = ReadCreate(json::parse(R"({"name": "t1", "env": {"A": "1"},
      "labels": {"code-toolbox-language": "python", "harbor.managed": "true"},
      "autoStopInterval": 0, "autoDeleteInterval": 0, "cpu": 1, "memory": 2, "disk": 3,
      "networkBlockAll": true, "volumes": [], "snapshot": "my-image", "target": "us"})"));
  EXPECT_EQ(r.spec.name, "t1");
  EXPECT_EQ(r.spec.env.at("A"), "1");
  EXPECT_EQ(r.spec.labels.at("harbor.managed"), "true");
  EXPECT_EQ(r.spec.idle_pause_seconds, 0);
  EXPECT_TRUE(r.spec.delete_on_lease_end);
  EXPECT_EQ(r.spec.shape.vcpu, 1);
  EXPECT_EQ(r.spec.shape.memory_mib, 2048);
  EXPECT_EQ(r.spec.shape.disk_mib, 3072);
  EXPECT_EQ(r.spec.timeout_seconds, contract::kTimeoutSeconds.max);  // until stopped
  ASSERT_TRUE(r.spec.network);
  EXPECT_FALSE(r.spec.network->internet);
  EXPECT_EQ(r.snapshot, "my-image");
  EXPECT_FALSE(r.dockerfile);
}

TEST(DaytonaTest, CreateDefaultsAreDaytonas) {
  CreateRequest r = ReadCreate(json{{"env", json::object()}, {"labels", json::object()}});
  EXPECT_EQ(r.spec.idle_pause_seconds, kDefaultAutoStopMinutes * 60);
  EXPECT_FALSE(r.spec.delete_on_lease_end);
  ASSERT_TRUE(r.spec.network);
  EXPECT_TRUE(r.spec.network->internet);  // Daytona's default: not blocked
  EXPECT_FALSE(r.snapshot);
  CreateRequest b = ReadCreate(json::parse(
      R"({"buildInfo": {"dockerfileContent": "FROM base\nRUN true\n", "contextHashes": []},
          "ttlMinutes": 10, "networkAllowList": "8.8.8.0/24, 1.2.3.4/32"})"));
  EXPECT_EQ(b.dockerfile, "FROM base\nRUN true\n");
  EXPECT_EQ(b.spec.timeout_seconds, 600);
  EXPECT_TRUE(b.spec.network->internet);
  EXPECT_EQ(b.spec.network->allow, (std::vector<std::string>{"8.8.8.0/24", "1.2.3.4/32"}));
}

TEST(DaytonaTest, CreateIssuesNameTheFieldAndFeaturesAreRefusedByName) {
  try {
    ReadCreate(json::parse(R"({"cpu": 99, "env": {"A": 1}, "colour": "red",
                               "networkAllowList": "not a cidr!"})"));
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status().code(), Code::kInvalidRequest);
    auto paths = IssuePaths(e);
    for (const char* p : {"body.cpu", "body.env.A", "body.colour", "body.networkAllowList"})
      EXPECT_NE(std::find(paths.begin(), paths.end(), p), paths.end()) << p << " " << e.what();
  }
  for (const char* body : {R"({"volumes": [{"volumeId": "v", "mountPath": "/d"}]})",
                           R"({"gpu": 1})", R"({"kvm": true})", R"({"public": true})"}) {
    try {
      ReadCreate(json::parse(body));
      FAIL() << "accepted " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status().code(), Code::kNotSupported) << body;
      EXPECT_FALSE(e.status().details().value("feature", "").empty()) << body;
    }
  }
}

TEST(DaytonaTest, ExecAndCodeRunReadTheirBodies) {
  ExecRequest e = ReadExecute(json::parse(R"({"command": "ls", "cwd": "/tmp",
                                              "envs": {"X": "y"}, "timeout": 5})"));
  EXPECT_EQ(e.command.command, "ls");
  EXPECT_EQ(e.command.cwd, "/tmp");
  EXPECT_EQ(e.command.env.at("X"), "y");
  EXPECT_EQ(e.options.timeout_ms, 5000);
  ExecRequest none = ReadExecute(json{{"command", "true"}});
  EXPECT_EQ(none.options.timeout_ms, contract::kExecTimeoutMs.max);  // 0 or none: no timeout
  ExecRequest py =
      ReadCodeRun(json::parse(R"j({"code": "print(1)", "language": "python", "argv": ["a"]})j"));
  EXPECT_EQ(*py.command.argv, (std::vector<std::string>{"python3", "-c", "print(1)", "a"}));
  EXPECT_THROW(ReadCodeRun(json::parse(R"({"code": "x", "language": "cobol"})")), ApiError);
}

TEST(DaytonaTest, SessionIdsAreOnePathComponent) {
  EXPECT_EQ(ParseSessionId("6f1c-uuid_v4.x", "path.sessionId"), "6f1c-uuid_v4.x");
  for (const char* bad : {"", ".", "..", "a/b", "../etc", "a b", "x\n"})
    EXPECT_THROW(ParseSessionId(bad, "path.sessionId"), ApiError) << bad;
  EXPECT_THROW(ParseSessionId(std::string(129, 'a'), "path.sessionId"), ApiError);
}

TEST(DaytonaTest, ASandboxHasEveryFieldTheSdkRequires) {
  control::SandboxRecord r;
  r.id = "sb1";
  r.spec.owner = "key_1";
  r.spec.shape = Shape{2, 1536, 4096};
  r.state = control::SandboxState::kPaused;
  r.network.internet = true;
  r.network.allow = {"10.0.0.0/8", "pypi.org"};
  json j = SandboxJson(r, "base", "http://h/daytona/toolbox");
  for (const char* f :
       {"id", "organizationId", "name", "user", "env", "labels", "public", "networkBlockAll", "kvm",
        "target", "cpu", "gpu", "memory", "disk", "toolboxProxyUrl", "state"})
    EXPECT_TRUE(j.contains(f)) << f;
  EXPECT_EQ(j["name"], "sb1");  // no name: the id
  EXPECT_EQ(j["cpu"], 2);       // whole units, rounded up
  EXPECT_EQ(j["memory"], 2);
  EXPECT_EQ(j["disk"], 4);
  EXPECT_TRUE(j["cpu"].is_number_integer());
  EXPECT_EQ(j["state"], "stopped");  // kiln's pause is Daytona's stop
  EXPECT_EQ(j["networkAllowList"], "10.0.0.0/8");
  EXPECT_EQ(j["domainAllowList"], "pypi.org");
  EXPECT_EQ(DaytonaState(control::SandboxState::kRunning), "started");
  EXPECT_EQ(DaytonaState(control::SandboxState::kStopped), "destroyed");
}

TEST(DaytonaTest, ErrorsCarryTheCodeTheSdkMapsToItsExceptions) {
  EXPECT_EQ(HttpStatus(Code::kNoCapacity), 503);
  EXPECT_EQ(HttpStatus(Code::kNotSupported), 501);
  EXPECT_EQ(HttpStatus(Code::kAgentTimeout), 408);
  EXPECT_EQ(HttpStatus(Code::kNotFound), 404);
  json missing = ErrorBody(Status(Code::kFileNotFound, "/x: no such file"), "/daytona/t");
  EXPECT_EQ(missing["code"], "FILE_NOT_FOUND");
  EXPECT_EQ(missing["source"], "DAYTONA_DAEMON");
  EXPECT_EQ(missing["statusCode"], 404);
  EXPECT_EQ(missing["message"], "/x: no such file");
  EXPECT_EQ(missing["path"], "/daytona/t");
}

}  // namespace
}  // namespace daytona_test
}  // namespace kiln::api::daytona
