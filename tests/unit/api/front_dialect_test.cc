// ApiFront's one way to choose an error's shape: the Dialect that owns the
// request (by its path's prefix), for every error or only its routes'.
#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/front.h"
#include "fakes/fake_exchange.h"
#include "store/db.h"

namespace kiln::api {
namespace front_dialect_test {
namespace {

using json = nlohmann::json;

// A dialect under /x/ whose errors read {"shape": "x", "message": ...}.
ApiFront::Dialect XDialect(ApiFront::Dialect::Errors errors) {
  ApiFront::Dialect d;
  d.prefix = "/x/";
  d.send_error = [](Exchange& ex, const Status& s) {
    if (ex.responded()) return;
    ex.SendJson(418, json{{"shape", "x"}, {"message", s.message()}});
  };
  d.errors = errors;
  return d;
}

class FrontDialectTest : public ::testing::Test {
 protected:
  FrontDialectTest() {
    router_.Add("GET", "/x/thing", [](Exchange&) { throw NotFound("thing"); });
    router_.Add("POST", "/x/thing", [](Exchange&) { throw NotFound("thing"); });
    router_.Add("GET", "/v1/thing", [](Exchange&) { throw NotFound("thing"); });
  }

  testutil::FakeExchange Call(ApiFront& front, const std::string& method, const std::string& path,
                              bool with_key = true) {
    testutil::FakeExchange ex(method, path);
    if (with_key) ex.headers_ = {{"Authorization", "Bearer " + key_.second}};
    front.Handle(ex);
    return ex;
  }

  store::Db db_{":memory:"};
  store::KeyStore keys_{db_};
  store::IdempotencyStore idem_{db_};
  Router router_;
  std::pair<store::ApiKey, std::string> key_ = keys_.Create("t", false, std::nullopt);
};

TEST_F(FrontDialectTest, ARouteErrorIsInTheShapeOfTheDialectThatOwnsThePath) {
  ApiFront front(router_, keys_, idem_);
  front.AddDialect(XDialect(ApiFront::Dialect::Errors::kAll));
  auto own = Call(front, "GET", "/x/thing");
  EXPECT_EQ(own.status_, 418);
  EXPECT_EQ(own.body_, (json{{"shape", "x"}, {"message", "thing not found"}}));
  // Outside its prefix: kiln's own shape.
  auto kiln = Call(front, "GET", "/v1/thing");
  EXPECT_EQ(kiln.status_, 404);
  EXPECT_EQ(kiln.body_["error"]["code"], "not_found");
}

TEST_F(FrontDialectTest, AnAllErrorsDialectAnswersTheRefusalsBeforeTheRoute) {
  ApiFront front(router_, keys_, idem_);
  front.AddDialect(XDialect(ApiFront::Dialect::Errors::kAll));
  auto no_key = Call(front, "GET", "/x/thing", false);
  EXPECT_EQ(no_key.status_, 418);
  // No key function of its own: kiln's Bearer, and kiln's hint.
  EXPECT_EQ(no_key.body_["message"], "missing API key: send Authorization: Bearer KEY");
  auto no_route = Call(front, "GET", "/x/none");
  EXPECT_EQ(no_route.status_, 418);
  EXPECT_EQ(no_route.body_["message"], "no route GET /x/none");
}

TEST_F(FrontDialectTest, ARoutesOnlyDialectLeavesTheRefusalsBeforeTheRouteInKilnsShape) {
  ApiFront front(router_, keys_, idem_);
  front.AddDialect(XDialect(ApiFront::Dialect::Errors::kRoutes));
  EXPECT_EQ(Call(front, "GET", "/x/thing").body_["shape"], "x");
  auto no_key = Call(front, "GET", "/x/thing", false);
  EXPECT_EQ(no_key.status_, 401);
  EXPECT_EQ(no_key.body_["error"]["code"], "unauthorized");
  auto no_route = Call(front, "GET", "/x/none");
  EXPECT_EQ(no_route.status_, 404);
  EXPECT_EQ(no_route.body_["error"]["code"], "route_not_found");
  auto no_method = Call(front, "DELETE", "/x/thing");
  EXPECT_EQ(no_method.status_, 405);
  EXPECT_EQ(no_method.body_["error"]["code"], "method_not_allowed");
}

TEST_F(FrontDialectTest, ADialectsOwnKeyAndHint) {
  ApiFront front(router_, keys_, idem_);
  ApiFront::Dialect d = XDialect(ApiFront::Dialect::Errors::kAll);
  d.key = [](const Exchange& ex) -> std::optional<std::string> {
    std::string key = ex.Header("X-Key");
    if (key.empty()) return std::nullopt;
    return key;
  };
  d.key_hint = "X-Key: KEY";
  front.AddDialect(d);
  auto no_key = Call(front, "GET", "/x/thing");  // a Bearer key is not where /x/ looks
  EXPECT_EQ(no_key.body_["message"], "missing API key: send X-Key: KEY");
  testutil::FakeExchange ex("GET", "/x/thing");
  ex.headers_ = {{"X-Key", key_.second}};
  front.Handle(ex);
  EXPECT_EQ(ex.body_["message"], "thing not found");
}

// Under an Idempotency-Key the dialect's answer is the one stored, and a
// retry replays it.
TEST_F(FrontDialectTest, AnIdempotentRequestStoresTheDialectsAnswer) {
  ApiFront front(router_, keys_, idem_);
  front.AddDialect(XDialect(ApiFront::Dialect::Errors::kRoutes));
  auto post = [&] {
    testutil::FakeExchange ex("POST", "/x/thing");
    ex.headers_ = {{"Authorization", "Bearer " + key_.second}, {"Idempotency-Key", "k-1"}};
    front.Handle(ex);
    return ex;
  };
  auto first = post();
  EXPECT_EQ(first.status_, 418);
  EXPECT_EQ(first.body_["shape"], "x");
  auto again = post();
  EXPECT_EQ(again.status_, 418);
  EXPECT_EQ(again.body_["shape"], "x");
  EXPECT_EQ(again.body_["replayed"], true);
}

}  // namespace
}  // namespace front_dialect_test
}  // namespace kiln::api
