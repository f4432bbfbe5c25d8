// SandboxFusion's dialect: the key in the path, and every error of a
// request under /sandboxfusion/ as a SandboxError.
#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/front.h"
#include "api/sandboxfusion/sandboxfusion.h"
#include "fakes/fake_exchange.h"
#include "store/db.h"

namespace kiln::api {
namespace sandboxfusion_dialect_test {
namespace {

class SandboxFusionDialectTest : public ::testing::Test {
 protected:
  SandboxFusionDialectTest() {
    router_.Add("POST", "/sandboxfusion/{key}/run_code",
                [](Exchange&) { throw ApiError(Code::kNoCapacity, "full"); });
    front_.AddDialect(SandboxFusionDialect());
  }

  store::Db db_{":memory:"};
  store::KeyStore keys_{db_};
  store::IdempotencyStore idem_{db_};
  Router router_;
  ApiFront front_{router_, keys_, idem_};
  std::pair<store::ApiKey, std::string> key_ = keys_.Create("t", false, std::nullopt);
};

TEST_F(SandboxFusionDialectTest, ARoutesErrorIsASandboxErrorThatVerlRetries) {
  testutil::FakeExchange ex("POST", "/sandboxfusion/" + key_.second + "/run_code");
  front_.Handle(ex);
  EXPECT_EQ(ex.status_, 504);
  EXPECT_EQ(ex.body_["status"], "SandboxError");
  EXPECT_EQ(ex.body_["message"], "no_capacity: full");
}

TEST_F(SandboxFusionDialectTest, AMissingKeyIsASandboxErrorToo) {
  testutil::FakeExchange ex("POST", "/sandboxfusion/");
  front_.Handle(ex);
  EXPECT_EQ(ex.status_, 401);
  EXPECT_EQ(ex.body_["status"], "SandboxError");
  EXPECT_EQ(ex.body_["message"],
            "unauthorized: missing API key: send the kiln key in the URL: "
            "/sandboxfusion/KEY/run_code");
}

}  // namespace
}  // namespace sandboxfusion_dialect_test
}  // namespace kiln::api
