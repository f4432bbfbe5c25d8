// PandaStack's dialect: its routes' errors in PandaStack's shape, the
// refusals before a route (no key, no route) in kiln's, as its client has
// always read them.
#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/front.h"
#include "api/pandastack/pandastack.h"
#include "fakes/fake_exchange.h"
#include "store/db.h"

namespace kiln::api {
namespace pandastack_dialect_test {
namespace {

class PandaStackDialectTest : public ::testing::Test {
 protected:
  PandaStackDialectTest() {
    router_.Add("GET", "/pandastack/v1/sandboxes/{id}",
                [](Exchange&) { throw ApiError(Code::kNoCapacity, "full"); });
    front_.AddDialect(PandaStackDialect());
  }
  testutil::FakeExchange Get(const std::string& path, bool with_key = true) {
    testutil::FakeExchange ex("GET", path);
    if (with_key) ex.headers_ = {{"Authorization", "Bearer " + key_.second}};
    front_.Handle(ex);
    return ex;
  }

  store::Db db_{":memory:"};
  store::KeyStore keys_{db_};
  store::IdempotencyStore idem_{db_};
  Router router_;
  ApiFront front_{router_, keys_, idem_};
  std::pair<store::ApiKey, std::string> key_ = keys_.Create("t", false, std::nullopt);
};

TEST_F(PandaStackDialectTest, ARoutesErrorIsPandaStacks) {
  auto ex = Get("/pandastack/v1/sandboxes/sb1");
  EXPECT_EQ(ex.status_, 503);
  EXPECT_EQ(ex.body_, (nlohmann::json{{"error", "full"}, {"code", "no_capacity"}}));
  bool retry_after = false;
  for (const auto& [k, v] : ex.extra_headers) retry_after |= k == "Retry-After" && v == "5";
  EXPECT_TRUE(retry_after);
}

TEST_F(PandaStackDialectTest, RefusalsBeforeTheRouteAreKilns) {
  auto no_key = Get("/pandastack/v1/sandboxes/sb1", false);
  EXPECT_EQ(no_key.status_, 401);
  EXPECT_EQ(no_key.body_["error"]["code"], "unauthorized");
  EXPECT_EQ(no_key.body_["error"]["message"], "missing API key: send Authorization: Bearer KEY");
  auto no_route = Get("/pandastack/v1/sandboxes/sb1/a/b/c");
  EXPECT_EQ(no_route.status_, 404);
  EXPECT_EQ(no_route.body_["error"]["code"], "route_not_found");
}

}  // namespace
}  // namespace pandastack_dialect_test
}  // namespace kiln::api
