// The E2B front's pure mapping (src/api/e2b/routes.h): E2B's bodies and
// queries read into kiln's requests, kiln's objects in E2B's shapes, the
// interpreter port's stream lines, the refusals.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <vector>

#include "api/e2b/e2b.h"
#include "api/e2b/routes.h"
#include "api/errors.h"
#include "common/contract.h"
#include "unit/support/api_issue_paths.h"

namespace kiln::api::e2b {
namespace e2b_control_test {
namespace {

using nlohmann::json;

Code CodeOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e.status().code();
  }
  return Code::kOk;
}

TEST(E2bControlTest, CreateMapsTheSdksBody) {
  CreateRequest r = ReadCreate(json::parse(R"({"templateID": "base", "timeout": 600,
      "metadata": {"team": "rl"}, "envVars": {"A": "1"}, "autoPause": true,
      "allow_internet_access": true, "secure": true, "autoResume": {"enabled": false}})"));
  EXPECT_EQ(r.template_id, "base");
  EXPECT_EQ(r.timeout_seconds, 600);
  EXPECT_EQ(r.spec.timeout_seconds, 600);
  EXPECT_EQ(r.spec.labels.at("team"), "rl");
  EXPECT_EQ(r.spec.env.at("A"), "1");
  EXPECT_TRUE(r.spec.pause_on_lease_end);
  EXPECT_FALSE(r.spec.auto_wake);
  ASSERT_TRUE(r.spec.network);
  EXPECT_TRUE(r.spec.network->internet);
}

TEST(E2bControlTest, CreateDefaultsAreOfflineAndE2bsTimeout) {
  CreateRequest r = ReadCreate(json{{"templateID", "base"}, {"metadata", json::object()}});
  EXPECT_EQ(r.timeout_seconds, kDefaultTimeoutSeconds);
  ASSERT_TRUE(r.spec.network);
  EXPECT_FALSE(r.spec.network->internet);
  EXPECT_FALSE(r.spec.auto_wake);  // E2B's: a paused sandbox waits for connect()
  r = ReadCreate(json{{"templateID", "base"}, {"autoResume", {{"enabled", true}}}});
  EXPECT_TRUE(r.spec.auto_wake);
}

TEST(E2bControlTest, AShortTimeoutKeepsKilnsLeastLeaseInTheSpec) {
  CreateRequest r = ReadCreate(json{{"templateID", "base"}, {"timeout", 5}});
  EXPECT_EQ(r.timeout_seconds, 5);
  EXPECT_EQ(r.spec.timeout_seconds, contract::kTimeoutSeconds.min);
}

TEST(E2bControlTest, CreateNamesBadFields) {
  try {
    ReadCreate(json::parse(R"({"timeout": 0, "envVars": {"1x": "y"}, "bogus": 1})"));
    FAIL();
  } catch (const ApiError& e) {
    auto paths = IssuePaths(e);
    for (const char* p : {"body.templateID", "body.timeout", "body.envVars.1x", "body.bogus"})
      EXPECT_NE(std::find(paths.begin(), paths.end(), p), paths.end()) << p;
  }
}

TEST(E2bControlTest, CreateRefusesFeaturesKilnLacksByName) {
  for (const char* body :
       {R"({"templateID": "base", "volumeMounts": [{"name": "v", "path": "/v"}]})",
        R"({"templateID": "base", "mcp": {"x": {}}})",
        R"({"templateID": "base", "network": {"maskRequestHost": "x"}})"}) {
    try {
      ReadCreate(json::parse(body));
      FAIL() << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status().code(), Code::kNotSupported) << body;
      EXPECT_TRUE(e.status().details().contains("feature")) << body;
    }
  }
}

TEST(E2bControlTest, NetworkDenyAllWithAllowOutIsTheAllowList) {
  CreateRequest r = ReadCreate(json::parse(R"({"templateID": "base", "allow_internet_access": true,
      "network": {"allowOut": ["example.com"], "denyOut": ["0.0.0.0/0"]}})"));
  ASSERT_TRUE(r.spec.network);
  EXPECT_TRUE(r.spec.network->internet);
  EXPECT_EQ(r.spec.network->allow, std::vector<std::string>{"example.com"});
  // Offline by default: allowOut alone opens those hosts only.
  r = ReadCreate(
      json::parse(R"({"templateID": "base", "network": {"allowOut": ["example.com"]}})"));
  EXPECT_TRUE(r.spec.network->internet);
  EXPECT_EQ(r.spec.network->allow, std::vector<std::string>{"example.com"});
  // The internet with a deny list.
  r = ReadCreate(json::parse(R"({"templateID": "base", "allow_internet_access": true,
      "network": {"denyOut": ["example.org"]}})"));
  EXPECT_TRUE(r.spec.network->internet);
  EXPECT_TRUE(r.spec.network->allow.empty());
  EXPECT_EQ(r.spec.network->deny, std::vector<std::string>{"example.org"});
  // allowOut as exceptions to a partial denyOut: kiln's deny wins, refused.
  EXPECT_EQ(CodeOf([] {
              ReadCreate(json::parse(R"({"templateID": "base", "allow_internet_access": true,
                  "network": {"allowOut": ["a.example.org"], "denyOut": ["example.org"]}})"));
            }),
            Code::kNotSupported);
  EXPECT_EQ(CodeOf([] {
              ReadCreate(json::parse(
                  R"({"templateID": "base", "network": {"allowOut": ["not a host!"]}})"));
            }),
            Code::kInvalidRequest);
}

TEST(E2bControlTest, NullMembersAreAbsent) {
  ConnectRequest c = ReadConnect(json::parse(R"({"timeout": null})"));
  EXPECT_FALSE(c.timeout_seconds);
  EXPECT_EQ(ReadConnect(json{{"timeout", 30}}).timeout_seconds, 30);
  // memory false: a reboot on connect, a files-only pause.
  EXPECT_TRUE(ReadConnect(json{{"memory", false}}).reboot);
  EXPECT_FALSE(ReadConnect(json::object()).reboot);
  EXPECT_EQ(ReadPause(json{{"memory", false}}), std::optional<bool>(false));
  EXPECT_EQ(ReadPause(json{{"memory", true}, {"requireHealthyGuest", true}}),
            std::optional<bool>(true));
  EXPECT_EQ(ReadPause(json::object()), std::nullopt);
  EXPECT_FALSE(ReadCreate(json::parse(R"({"templateID": "base", "autoPauseMemory": false})"))
                   .spec.pause_memory);
}

TEST(E2bControlTest, TimeoutIsRequiredAndBounded) {
  EXPECT_EQ(ReadTimeout(json{{"timeout", 30}}), 30);
  EXPECT_EQ(CodeOf([] { ReadTimeout(json::object()); }), Code::kInvalidRequest);
  EXPECT_EQ(CodeOf([] { ReadTimeout(json{{"timeout", 100000}}); }), Code::kInvalidRequest);
  EXPECT_EQ(ReadTimeout(json{{"timeout", 0}}), 0);  // ends the lease now
  EXPECT_EQ(CodeOf([] { ReadTimeout(json{{"timeout", -1}}); }), Code::kInvalidRequest);
  EXPECT_EQ(ReadRefresh(json::object()), 60);
}

TEST(E2bControlTest, MetricsWindowAndIds) {
  std::map<std::string, std::string> q;
  auto get = [&q](const std::string& n) -> std::optional<std::string> {
    auto it = q.find(n);
    return it == q.end() ? std::nullopt : std::optional(it->second);
  };
  MetricsWindow w = ReadMetricsWindow(get, 1000, 9000);
  EXPECT_EQ(w.from_ms, 1000);
  EXPECT_EQ(w.to_ms, 9000);
  q = {{"start", "1700000000"}, {"end", "1700000010"}};
  w = ReadMetricsWindow(get, 0, 0);
  EXPECT_EQ(w.from_ms, 1700000000000);
  EXPECT_EQ(w.to_ms, 1700000010999);
  for (auto bad : std::vector<std::map<std::string, std::string>>{
           {{"start", "soon"}}, {{"end", "-5"}}, {{"start", "20"}, {"end", "10"}}}) {
    q = bad;
    EXPECT_EQ(CodeOf([&] { ReadMetricsWindow(get, 0, 0); }), Code::kInvalidRequest);
  }
  EXPECT_EQ(ReadMetricsSandboxIds("a,b,,c"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(CodeOf([] { ReadMetricsSandboxIds(std::nullopt); }), Code::kInvalidRequest);
  EXPECT_EQ(CodeOf([] { ReadMetricsSandboxIds(","); }), Code::kInvalidRequest);
  std::string many;
  for (int i = 0; i < 101; ++i) many += "s" + std::to_string(i) + ",";
  EXPECT_EQ(CodeOf([&] { ReadMetricsSandboxIds(many); }), Code::kInvalidRequest);
}

TEST(E2bControlTest, MetadataFilterIsDecodedOnce) {
  // The SDKs percent-encode keys and values, then the pairs; the server
  // decoded the pairs' encoding already.
  auto m = ParseMetadataFilter("team=r%26l&user%20id=a%3Db");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], (std::pair<std::string, std::string>{"team", "r&l"}));
  EXPECT_EQ(m[1], (std::pair<std::string, std::string>{"user id", "a=b"}));
  EXPECT_EQ(CodeOf([] { ParseMetadataFilter(std::string(9000, 'a')); }), Code::kInvalidRequest);
  EXPECT_EQ(CodeOf([] { ParseMetadataFilter("a=%zz"); }), Code::kInvalidRequest);
}

TEST(E2bControlTest, ListQueryReadsStatesPagesAndOrder) {
  std::map<std::string, std::string> q{
      {"state", "paused"}, {"limit", "2"}, {"nextToken", NextToken(4)}, {"order", "desc"}};
  auto get = [&q](const std::string& n) -> std::optional<std::string> {
    auto it = q.find(n);
    return it == q.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  ListQuery l = ReadListQuery(get);
  EXPECT_FALSE(l.running);
  EXPECT_TRUE(l.paused);
  EXPECT_EQ(l.limit, 2);
  EXPECT_EQ(l.offset, 4u);
  EXPECT_TRUE(l.descending);
  q = {{"state", "running,stopped"}};
  EXPECT_EQ(CodeOf([&] { ReadListQuery(get); }), Code::kInvalidRequest);
  q = {{"limit", "101"}};
  EXPECT_EQ(CodeOf([&] { ReadListQuery(get); }), Code::kInvalidRequest);
  q = {{"nextToken", "x"}};
  EXPECT_EQ(CodeOf([&] { ReadListQuery(get); }), Code::kInvalidRequest);
}

control::SandboxRecord Record() {
  control::SandboxRecord r;
  r.id = "0c6b2c0e-5f2a-4e39-9a53-2a4c8b1f3d10";
  r.state = control::SandboxState::kRunning;
  r.created_ms = 1'700'000'000'000;
  r.expires_ms = r.created_ms + 300'000;
  r.spec.labels = {{"team", "rl"}};
  r.network.internet = true;
  return r;
}

TEST(E2bControlTest, SandboxShapesCarryWhatTheSdksRead) {
  SandboxExtras x{"base", "envd-token", "traffic-token", 1'700'000'001'000};
  json created = CreatedJson(Record(), x);
  for (const char* k : {"templateID", "sandboxID", "clientID", "envdVersion", "envdAccessToken",
                        "trafficAccessToken"})
    EXPECT_TRUE(created.contains(k)) << k;
  EXPECT_EQ(created["envdVersion"], kEnvdVersion);
  EXPECT_TRUE(created["domain"].is_null());
  json listed = ListedJson(Record(), x);
  for (const char* k :
       {"startedAt", "endAt", "cpuCount", "memoryMB", "diskSizeMB", "state", "metadata"})
    EXPECT_TRUE(listed.contains(k)) << k;
  EXPECT_EQ(listed["state"], "running");
  json detail = DetailJson(Record(), x);
  EXPECT_EQ(detail["allowInternetAccess"], true);
  EXPECT_EQ(detail["lifecycle"]["onTimeout"], "kill");
  EXPECT_EQ(detail["envdAccessToken"], "envd-token");
}

TEST(E2bControlTest, StatesAreRunningOrPaused) {
  EXPECT_EQ(E2bStateName(control::SandboxState::kStarting), "running");
  EXPECT_EQ(E2bStateName(control::SandboxState::kResuming), "paused");
  EXPECT_FALSE(E2bStateName(control::SandboxState::kStopped));
}

TEST(E2bControlTest, ExecuteLinesAreE2bsStream) {
  json out = ExecuteLine(json{{"k", "stdout"}, {"text", "hi\n"}}, 5);
  EXPECT_EQ(out, (json{{"type", "stdout"}, {"text", "hi\n"}, {"timestamp", 5}}));
  json err = ExecuteLine(
      json{{"k", "error"}, {"name", "ZeroDivisionError"}, {"value", "x"}, {"traceback", "tb"}}, 0);
  EXPECT_EQ(err["type"], "error");
  EXPECT_EQ(err["traceback"], "tb");
  json res = ExecuteLine(
      json{{"k", "result"},
           {"main", true},
           {"data", {{"text/plain", "2"}, {"image/png", "iVBO"}, {"application/x-thing", "?"}}}},
      0);
  EXPECT_EQ(res["type"], "result");
  EXPECT_EQ(res["is_main_result"], true);
  EXPECT_EQ(res["text"], "2");
  EXPECT_EQ(res["png"], "iVBO");
  EXPECT_EQ(res["extra"]["application/x-thing"], "?");
  EXPECT_TRUE(ExecuteLine(json{{"k", "start"}}, 0).is_null());
}

// E2B's Result model: a string's quotes come off its text, nothing else does.
TEST(E2bControlTest, AStringsTextLosesItsQuotesAsE2bsServerGivesIt) {
  auto text = [](const std::string& plain) {
    return ResultLine(true, json{{"text/plain", plain}})["text"].get<std::string>();
  };
  EXPECT_EQ(text("'supertest'"), "supertest");
  EXPECT_EQ(text("\"it's\""), "it's");
  EXPECT_EQ(text("''"), "");
  EXPECT_EQ(text("'a\""), "'a\"");
  EXPECT_EQ(text("[1, 'x']"), "[1, 'x']");
  EXPECT_EQ(text("42"), "42");
  EXPECT_EQ(ResultLine(true, json{{"text/html", "'<b>'"}})["html"], "'<b>'");
}

TEST(E2bControlTest, RefusalsNameTheFeatureOrAre404) {
  Status s = Unsupported("GET", "/e2b/volumes");
  EXPECT_EQ(s.code(), Code::kNotSupported);
  EXPECT_EQ(s.details()["feature"], "volumes");
  // Served now: builds, metrics; what is left of templates' writes is refused by name.
  EXPECT_EQ(Unsupported("PATCH", "/e2b/templates/t").details()["feature"], "template updates");
  EXPECT_EQ(Unsupported("GET", "/e2b/templates/t/builds/b/logs").details()["feature"],
            "template build listings");
  EXPECT_EQ(Unsupported("GET", "/e2b/sandboxes/x/logs").details()["feature"],
            "logs apart from a build's status");
  EXPECT_EQ(Unsupported("GET", "/e2b/nothing").code(), Code::kRouteNotFound);
  EXPECT_EQ(HttpStatus(Unsupported("GET", "/e2b/secrets")), 501);
}

}  // namespace
}  // namespace e2b_control_test
}  // namespace kiln::api::e2b
