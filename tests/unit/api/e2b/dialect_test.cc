// E2B's dialect: every error of a request under /e2b/ in E2B's shape, and
// the key where E2B's clients put it (X-API-Key, spelled e2b_<hex>).
#include <gtest/gtest.h>

#include "api/e2b/e2b.h"
#include "api/errors.h"
#include "api/front.h"
#include "fakes/fake_exchange.h"
#include "store/db.h"

namespace kiln::api {
namespace e2b_dialect_test {
namespace {

class E2bDialectTest : public ::testing::Test {
 protected:
  E2bDialectTest() {
    router_.Add("GET", "/e2b/sandboxes/{id}", [](Exchange& ex) {
      throw ApiError(Code::kNotFound, "sandbox " + ex.params["id"] + " was not found");
    });
    front_.AddDialect(E2bDialect());
  }

  store::Db db_{":memory:"};
  store::KeyStore keys_{db_};
  store::IdempotencyStore idem_{db_};
  Router router_;
  ApiFront front_{router_, keys_, idem_};
  std::pair<store::ApiKey, std::string> key_ = keys_.Create("t", false, std::nullopt);
};

TEST_F(E2bDialectTest, ARoutesErrorIsE2bsWithItsKeySpelledE2bs) {
  testutil::FakeExchange ex("GET", "/e2b/sandboxes/sb1");
  ex.headers_ = {{"X-API-Key", e2b::E2bKeyFromKiln(key_.second)}};
  front_.Handle(ex);
  EXPECT_EQ(ex.status_, 404);
  EXPECT_EQ(ex.body_, (nlohmann::json{{"code", 404},
                                      {"message", "sandbox sb1 was not found"},
                                      {"kilnCode", "not_found"}}));
}

TEST_F(E2bDialectTest, AMissingKeyIsE2bsNamingWhereToPutIt) {
  testutil::FakeExchange ex("GET", "/e2b/sandboxes/sb1");
  front_.Handle(ex);
  EXPECT_EQ(ex.status_, 401);
  EXPECT_EQ(ex.body_["code"], 401);
  EXPECT_EQ(ex.body_["kilnCode"], "unauthorized");
  EXPECT_NE(ex.body_["message"].get<std::string>().find("X-API-Key: e2b_<hex>"), std::string::npos);
}

}  // namespace
}  // namespace e2b_dialect_test
}  // namespace kiln::api
