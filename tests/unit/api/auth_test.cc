// The request side of API keys (src/api/auth.h): the bearer token of a
// request and the caller it is answered for. The keys themselves are
// tests/unit/store/key_store_test.cc's.
#include "api/auth.h"

#include <gtest/gtest.h>

#include <thread>

#include "fakes/fake_exchange.h"

namespace kiln::api {
namespace auth_test {
namespace {

TEST(AuthTest, BearerToken) {
  EXPECT_EQ(BearerToken("Bearer kiln_abc"), "kiln_abc");
  EXPECT_EQ(BearerToken("bearer kiln_abc"), "kiln_abc");
  EXPECT_EQ(BearerToken("BEARER kiln_abc"), "kiln_abc");
  EXPECT_EQ(BearerToken("  Bearer   kiln_abc  "), "kiln_abc");
  EXPECT_EQ(BearerToken("Bearer\tkiln_abc"), "kiln_abc");
  EXPECT_EQ(BearerToken(""), std::nullopt);
  EXPECT_EQ(BearerToken("Bearer"), std::nullopt);
  EXPECT_EQ(BearerToken("Bearer   "), std::nullopt);
  EXPECT_EQ(BearerToken("Bearerkiln_abc"), std::nullopt);
  EXPECT_EQ(BearerToken("Basic a2lsbjp4"), std::nullopt);
  EXPECT_EQ(BearerToken("kiln_abc"), std::nullopt);
}

TEST(AuthTest, CallerIsPerRequestAndFailsClosed) {
  // Only the exchanges' addresses matter here.
  testutil::FakeExchange a, b;
  EXPECT_EQ(CallerOf(a).key_id, "");  // never set: anonymous
  EXPECT_FALSE(CallerOf(a).admin);

  SetCaller(a, Caller{"key_a", true, 5});
  EXPECT_EQ(CallerOf(a).key_id, "key_a");
  EXPECT_TRUE(CallerOf(a).admin);
  EXPECT_EQ(CallerOf(a).daily_limit_micros, 5);
  EXPECT_FALSE(CallerOf(b).admin);  // another exchange

  // Another thread never sees this thread's caller.
  bool other_admin = true;
  std::thread([&] { other_admin = CallerOf(a).admin; }).join();
  EXPECT_FALSE(other_admin);

  SetCaller(a, Caller{});  // the next, anonymous request on the connection
  EXPECT_FALSE(CallerOf(a).admin);
  EXPECT_EQ(CallerOf(a).key_id, "");
}

}  // namespace
}  // namespace auth_test
}  // namespace kiln::api
