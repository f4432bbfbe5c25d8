// The preview service's rules: public only where allowed, connections cut
// when who may reach a port narrows, nobody let in once the sandbox's key
// is revoked, and which tokens are valid.
#include "control/previews.h"

#include <gtest/gtest.h>

#include "common/time.h"
#include "store/db.h"

namespace kiln::control {
namespace previews_test {
namespace {

class PreviewsTest : public ::testing::Test {
 protected:
  Previews Make(bool allow_public) {
    return Previews(store_, keys_, {allow_public, [this](const std::string& id, int port) {
                                      cuts_.push_back(id + "|" + std::to_string(port));
                                    }});
  }

  store::Db db_{":memory:"};
  store::KeyStore key_store_{db_};
  store::PreviewStore store_{db_};
  Keys keys_{key_store_};
  std::vector<std::string> cuts_;
};

TEST_F(PreviewsTest, PublicPreviewsOnlyWhereKilndAllowsThem) {
  Previews off = Make(false);
  EXPECT_TRUE(off.MayShare(false).ok());
  EXPECT_EQ(off.MayShare(true).code(), Code::kForbidden);
  auto refused = off.Share("sb1", 8080, true, 60000);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kForbidden);
  EXPECT_FALSE(off.Find("sb1", 8080));
  Previews on = Make(true);
  auto shared = on.Share("sb1", 8080, true, 60000);
  ASSERT_TRUE(shared.ok());
  EXPECT_TRUE(shared->is_public);
}

TEST_F(PreviewsTest, APrivateShareEndsTheOpenConnectionsAPublicOneDoesNot) {
  Previews previews = Make(true);
  ASSERT_TRUE(previews.Share("sb1", 8080, true, 60000).ok());
  EXPECT_TRUE(cuts_.empty());
  ASSERT_TRUE(previews.Share("sb1", 8080, false, 60000).ok());
  EXPECT_EQ(cuts_, std::vector<std::string>{"sb1|8080"});
}

TEST_F(PreviewsTest, RotateRefusesEveryEarlierTokenAndEndsTheConnections) {
  Previews previews = Make(false);
  store::PreviewRecord p = *previews.Share("sb1", 8080, false, 60000);
  cuts_.clear();
  int64_t now = NowMs();
  std::string token = Previews::Token(p, now + 60000);
  EXPECT_TRUE(Previews::TokenValid(p, token, now));
  ASSERT_TRUE(previews.Rotate("sb1", 8080));
  EXPECT_EQ(cuts_, std::vector<std::string>{"sb1|8080"});
  store::PreviewRecord rotated = *previews.Find("sb1", 8080);
  EXPECT_FALSE(Previews::TokenValid(rotated, token, now));
  EXPECT_TRUE(Previews::TokenValid(rotated, Previews::Token(rotated, now + 1000), now));
  EXPECT_FALSE(previews.Rotate("sb1", 9090));  // none there
  EXPECT_EQ(cuts_.size(), 1u);
}

TEST_F(PreviewsTest, RevokeEndsThePreviewAndItsConnections) {
  Previews previews = Make(false);
  ASSERT_TRUE(previews.Share("sb1", 8080, false, 60000).ok());
  ASSERT_TRUE(previews.Share("sb1", 3000, false, 60000).ok());
  cuts_.clear();
  EXPECT_TRUE(previews.Revoke("sb1", 8080));
  EXPECT_EQ(cuts_, std::vector<std::string>{"sb1|8080"});
  EXPECT_FALSE(previews.Find("sb1", 8080));
  ASSERT_EQ(previews.List("sb1").size(), 1u);
  EXPECT_EQ(previews.List("sb1")[0].port, 3000);
  EXPECT_FALSE(previews.Revoke("sb1", 8080));
  EXPECT_EQ(cuts_.size(), 1u);
}

TEST_F(PreviewsTest, NobodyEntersOnceTheSandboxsKeyIsRevoked) {
  Previews previews = Make(false);
  auto [owner, secret] = keys_.Create("owner", false, 7000);
  ASSERT_TRUE(previews.Share("sb1", 8080, false, 60000).ok());
  auto in = previews.Enter("sb1", owner.id, 8080);
  ASSERT_TRUE(in);
  EXPECT_EQ(in->preview.port, 8080);
  EXPECT_EQ(in->owner.id, owner.id);
  EXPECT_EQ(in->owner.daily_limit_micros, 7000);
  EXPECT_FALSE(previews.Enter("sb1", owner.id, 9090));       // no preview there
  EXPECT_FALSE(previews.Enter("sb1", "key_unknown", 8080));  // no such key
  ASSERT_TRUE(keys_.Revoke(owner.id));
  EXPECT_FALSE(previews.Enter("sb1", owner.id, 8080));
}

TEST_F(PreviewsTest, OnlyTheRecordsOwnUnexpiredTokensAreValid) {
  Previews previews = Make(false);
  store::PreviewRecord p = *previews.Share("sb1", 8080, false, 60000);
  store::PreviewRecord other = *previews.Share("sb1", 8081, false, 60000);
  int64_t now = NowMs();
  std::string token = Previews::Token(p, now + 1000);
  EXPECT_TRUE(Previews::TokenValid(p, token, now));
  EXPECT_FALSE(Previews::TokenValid(p, token, now + 1000));  // expired at its expiry
  EXPECT_FALSE(Previews::TokenValid(other, token, now));     // another port's
  std::string expiry = token.substr(0, token.find('.'));
  EXPECT_FALSE(Previews::TokenValid(p, expiry + ".00", now));
  for (const char* bad : {"", ".", "abc", "123", ".deadbeef", "12x.ab", "99999999999999999999.ab"})
    EXPECT_FALSE(Previews::TokenValid(p, bad, now)) << bad;
}

TEST_F(PreviewsTest, PickTokenTakesAValidOneAmongPlantedOnes) {
  Previews previews = Make(false);
  store::PreviewRecord p = *previews.Share("sb1", 8080, false, 60000);
  int64_t now = NowMs();
  std::string good = Previews::Token(p, now + 60000);
  EXPECT_EQ(Previews::PickToken(p, {"planted", good}, now), good);
  EXPECT_EQ(Previews::PickToken(p, {good, "planted"}, now), good);
  EXPECT_EQ(Previews::PickToken(p, {"planted", "other"}, now), "planted");
  EXPECT_EQ(Previews::PickToken(p, {}, now), "");
}

}  // namespace
}  // namespace previews_test
}  // namespace kiln::control
