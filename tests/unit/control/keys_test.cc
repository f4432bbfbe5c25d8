// The key service: revocation answers the key as it is, a live key is what
// a sandbox's credentials ride on, and the operator's keys are the live
// admin keys, oldest first.
#include "control/keys.h"

#include <gtest/gtest.h>

#include "store/db.h"

namespace kiln::control {
namespace keys_test {
namespace {

class KeysTest : public ::testing::Test {
 protected:
  store::Db db_{":memory:"};
  store::KeyStore store_{db_};
  Keys keys_{store_};
};

TEST_F(KeysTest, RevokeAnswersTheRevokedKey) {
  auto [key, secret] = keys_.Create("k", false, std::nullopt);
  EXPECT_TRUE(keys_.Authenticate(secret));
  auto revoked = keys_.Revoke(key.id);
  ASSERT_TRUE(revoked);
  EXPECT_EQ(revoked->id, key.id);
  EXPECT_TRUE(revoked->revoked_ms);
  EXPECT_FALSE(keys_.Authenticate(secret));
  auto again = keys_.Revoke(key.id);  // keeps the first time
  ASSERT_TRUE(again);
  EXPECT_EQ(again->revoked_ms, revoked->revoked_ms);
  EXPECT_FALSE(keys_.Revoke("key_unknown"));
}

TEST_F(KeysTest, LiveIsNoneOnceRevoked) {
  auto [key, secret] = keys_.Create("k", false, 42);
  auto live = keys_.Live(key.id);
  ASSERT_TRUE(live);
  EXPECT_EQ(live->daily_limit_micros, 42);
  ASSERT_TRUE(keys_.Revoke(key.id));
  EXPECT_FALSE(keys_.Live(key.id));
  EXPECT_FALSE(keys_.Live("key_unknown"));
}

TEST_F(KeysTest, TheOperatorsAreTheLiveAdminKeysOldestFirst) {
  auto first = keys_.Create("first", true, std::nullopt).first;
  keys_.Create("tenant", false, std::nullopt);
  auto gone = keys_.Create("gone", true, std::nullopt).first;
  auto second = keys_.Create("second", true, std::nullopt).first;
  ASSERT_TRUE(keys_.Revoke(gone.id));
  std::vector<std::string> ids;
  for (const auto& k : keys_.Operators()) ids.push_back(k.id);
  EXPECT_EQ(ids, (std::vector<std::string>{first.id, second.id}));
  EXPECT_EQ(keys_.List().size(), 4u);
}

}  // namespace
}  // namespace keys_test
}  // namespace kiln::control
