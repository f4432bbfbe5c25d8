// Request routing (src/api/router.h): patterns with {params} and ":verb"
// suffixes, 404 route_not_found vs 405 method_not_allowed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/errors.h"
#include "api/router.h"
#include "fakes/fake_exchange.h"

namespace kiln::api {
namespace router_test {
namespace {

using nlohmann::json;
using testutil::FakeExchange;

// A router whose handlers answer {"route": <name>, "params": {...}}.
class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Add("GET", "/v1/health");
    Add("GET", "/v1/sandboxes");
    Add("POST", "/v1/sandboxes");
    Add("GET", "/v1/sandboxes/{id}");
    Add("DELETE", "/v1/sandboxes/{id}");
    Add("POST", "/v1/sandboxes/{id}:exec");
    Add("POST", "/v1/sandboxes/{id}:stop");
    Add("GET", "/v1/sandboxes/{id}/processes");
    Add("GET", "/v1/sandboxes/{id}/processes/{pid}");
    Add("POST", "/v1/sandboxes/{id}/processes/{pid}:signal");
    Add("PUT", "/v1/sandboxes/{id}/files");
  }

  void Add(const std::string& method, const std::string& pattern) {
    std::string name = method + " " + pattern;
    router_.Add(method, pattern, [name](Exchange& ex) {
      json params = json::object();
      for (const auto& [k, v] : ex.params) params[k] = v;
      ex.SendJson(200, json{{"route", name}, {"params", params}});
    });
  }

  // Dispatches and returns the handler's answer; fails the test on a throw.
  json Call(const std::string& method, const std::string& path) {
    FakeExchange ex(method, path);
    try {
      router_.Dispatch(ex);
    } catch (const ApiError& e) {
      ADD_FAILURE() << method << " " << path << " threw " << e.http_status() << " "
                    << CodeName(e.status().code());
      return nullptr;
    }
    EXPECT_EQ(ex.status_, 200);
    return ex.body_;
  }

  // Dispatches expecting an ApiError; returns it (status 0 if none was thrown).
  ApiError CallError(const std::string& method, const std::string& path) {
    FakeExchange ex(method, path);
    try {
      router_.Dispatch(ex);
    } catch (const ApiError& e) {
      EXPECT_FALSE(ex.responded()) << "handler ran before the error";
      return e;
    }
    ADD_FAILURE() << method << " " << path << " matched " << ex.body_.dump();
    return ApiError(Status::Ok());
  }

  Router router_;
};

TEST_F(RouterTest, MatchesStaticPaths) {
  EXPECT_EQ(Call("GET", "/v1/health")["route"], "GET /v1/health");
  EXPECT_EQ(Call("GET", "/v1/sandboxes")["route"], "GET /v1/sandboxes");
  EXPECT_EQ(Call("POST", "/v1/sandboxes")["route"], "POST /v1/sandboxes");
  EXPECT_EQ(Call("GET", "/v1/health")["params"], json::object());
}

TEST_F(RouterTest, ExtractsIdParameter) {
  json r = Call("GET", "/v1/sandboxes/3f1c9a2e-0000-4000-8000-000000000001");
  EXPECT_EQ(r["route"], "GET /v1/sandboxes/{id}");
  EXPECT_EQ(r["params"], (json{{"id", "3f1c9a2e-0000-4000-8000-000000000001"}}));
  EXPECT_EQ(Call("DELETE", "/v1/sandboxes/abc")["route"], "DELETE /v1/sandboxes/{id}");
  EXPECT_EQ(Call("DELETE", "/v1/sandboxes/abc")["params"]["id"], "abc");
}

TEST_F(RouterTest, VerbSuffixSelectsTheRoute) {
  json exec = Call("POST", "/v1/sandboxes/abc:exec");
  EXPECT_EQ(exec["route"], "POST /v1/sandboxes/{id}:exec");
  EXPECT_EQ(exec["params"], (json{{"id", "abc"}}));
  json stop = Call("POST", "/v1/sandboxes/abc:stop");
  EXPECT_EQ(stop["route"], "POST /v1/sandboxes/{id}:stop");
  EXPECT_EQ(stop["params"], (json{{"id", "abc"}}));
}

TEST_F(RouterTest, PlainIdDoesNotSwallowAVerb) {
  // GET on "abc:exec" must not match GET /v1/sandboxes/{id} with id
  // "abc:exec"; the path exists (POST), so it is a 405.
  ApiError e = CallError("GET", "/v1/sandboxes/abc:exec");
  EXPECT_EQ(e.http_status(), 405);
  EXPECT_EQ(CodeName(e.status().code()), "method_not_allowed");
  // DELETE likewise.
  EXPECT_EQ(CallError("DELETE", "/v1/sandboxes/abc:stop").http_status(), 405);
}

TEST_F(RouterTest, UnknownVerbIsRouteNotFound) {
  ApiError e = CallError("POST", "/v1/sandboxes/abc:explode");
  EXPECT_EQ(e.http_status(), 404);
  EXPECT_EQ(CodeName(e.status().code()), "route_not_found");
  EXPECT_EQ(CallError("GET", "/v1/sandboxes/abc:explode").http_status(), 404);
}

TEST_F(RouterTest, VerbWithoutIdDoesNotMatch) {
  EXPECT_EQ(CallError("POST", "/v1/sandboxes/:exec").http_status(), 404);
}

TEST_F(RouterTest, EmptyIdDoesNotMatch) {
  // "/v1/sandboxes/" has an empty last segment: no {id} route applies.
  ApiError e = CallError("GET", "/v1/sandboxes/");
  EXPECT_EQ(e.http_status(), 404);
  EXPECT_EQ(CodeName(e.status().code()), "route_not_found");
}

TEST_F(RouterTest, WrongMethodOnKnownPathIs405) {
  ApiError e = CallError("PUT", "/v1/sandboxes");
  EXPECT_EQ(e.http_status(), 405);
  EXPECT_EQ(CodeName(e.status().code()), "method_not_allowed");
  EXPECT_NE(std::string(e.what()).find("PUT"), std::string::npos);
  EXPECT_EQ(CallError("PATCH", "/v1/sandboxes/abc").http_status(), 405);
  EXPECT_EQ(CallError("GET", "/v1/sandboxes/abc:stop").http_status(), 405);
  EXPECT_EQ(CallError("POST", "/v1/health").http_status(), 405);
}

TEST_F(RouterTest, UnknownPathIs404) {
  for (const char* p : {"/", "", "/v2/sandboxes", "/v1", "/v1/sandbox", "/v1/sandboxes/abc/nothing",
                        "/v1/sandboxes/abc/processes/1/extra", "/v1/health/", "//v1/health"}) {
    ApiError e = CallError("GET", p);
    EXPECT_EQ(e.http_status(), 404) << p;
    EXPECT_EQ(CodeName(e.status().code()), "route_not_found") << p;
  }
}

TEST_F(RouterTest, MatchingIsCaseSensitive) {
  EXPECT_EQ(CallError("GET", "/V1/health").http_status(), 404);
  EXPECT_EQ(CallError("POST", "/v1/sandboxes/abc:EXEC").http_status(), 404);
  EXPECT_EQ(CallError("get", "/v1/health").http_status(), 405);
}

TEST_F(RouterTest, NestedParameters) {
  json r = Call("GET", "/v1/sandboxes/sb1/processes/42");
  EXPECT_EQ(r["route"], "GET /v1/sandboxes/{id}/processes/{pid}");
  EXPECT_EQ(r["params"], (json{{"id", "sb1"}, {"pid", "42"}}));
  json s = Call("POST", "/v1/sandboxes/sb1/processes/42:signal");
  EXPECT_EQ(s["route"], "POST /v1/sandboxes/{id}/processes/{pid}:signal");
  EXPECT_EQ(s["params"], (json{{"id", "sb1"}, {"pid", "42"}}));
  EXPECT_EQ(Call("GET", "/v1/sandboxes/sb1/processes")["params"], (json{{"id", "sb1"}}));
  EXPECT_EQ(Call("PUT", "/v1/sandboxes/sb1/files")["route"], "PUT /v1/sandboxes/{id}/files");
}

TEST_F(RouterTest, ParamsOfAFailedCandidateDoNotLeak) {
  // "/v1/sandboxes/{id}" is tried (and rejected by method) before the
  // matching route; the handler must see only its own parameters.
  json r = Call("POST", "/v1/sandboxes/xyz:stop");
  EXPECT_EQ(r["params"], (json{{"id", "xyz"}}));
}

TEST(RouterStandaloneTest, FirstMatchingRouteWins) {
  Router r;
  std::vector<std::string> ran;
  r.Add("GET", "/a/{x}", [&](Exchange& ex) { ran.push_back("param:" + ex.params["x"]); });
  r.Add("GET", "/a/b", [&](Exchange&) { ran.push_back("static"); });
  FakeExchange ex("GET", "/a/b");
  r.Dispatch(ex);
  EXPECT_EQ(ran, std::vector<std::string>{"param:b"});
}

TEST(RouterStandaloneTest, HandlerExceptionsPropagate) {
  Router r;
  r.Add("GET", "/x", [](Exchange&) { throw ApiError(Code::kBusy, "busy"); });
  FakeExchange ex("GET", "/x");
  try {
    r.Dispatch(ex);
    FAIL() << "no throw";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.http_status(), 409);
    EXPECT_EQ(CodeName(e.status().code()), "busy");
  }
}

TEST(RouterStandaloneTest, EmptyRouterIs404) {
  Router r;
  FakeExchange ex("GET", "/v1/health");
  try {
    r.Dispatch(ex);
    FAIL() << "no throw";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.http_status(), 404);
    EXPECT_EQ(CodeName(e.status().code()), "route_not_found");
  }
}

TEST_F(RouterTest, RoutesListsMethodAndPatternInOrder) {
  auto routes = router_.Routes();
  ASSERT_EQ(routes.size(), 11u);
  EXPECT_EQ(routes[0], "GET /v1/health");
  EXPECT_EQ(routes[5], "POST /v1/sandboxes/{id}:exec");
  EXPECT_EQ(routes[9], "POST /v1/sandboxes/{id}/processes/{pid}:signal");
}

}  // namespace
}  // namespace router_test
}  // namespace kiln::api
