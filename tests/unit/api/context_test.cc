// LaunchFor: the one way a front fills a launch from its caller.
#include "api/context.h"

#include <gtest/gtest.h>

#include "api/auth.h"
#include "fakes/fake_exchange.h"

namespace kiln::api {
namespace context_test {
namespace {

using std::chrono::seconds;
using std::chrono::steady_clock;

class GoneExchange : public testutil::FakeExchange {
 public:
  GoneExchange() : FakeExchange("POST", "/v1/sandboxes") {}
  bool ClientGone() override { return gone; }
  bool gone = false;
};

TEST(LaunchForTest, FillsTheCallersFieldsAndKeepsTheSpec) {
  GoneExchange ex;
  SetCaller(ex, Caller{"key_1", false, 5000});
  control::SandboxSpec spec;
  spec.owner = "someone else";  // the caller's key, whatever the front read
  spec.timeout_seconds = 77;
  auto before = steady_clock::now();
  launch::LaunchRequest req = LaunchFor(ex, spec);
  EXPECT_EQ(req.spec.owner, "key_1");
  EXPECT_EQ(req.spec.timeout_seconds, 77);
  EXPECT_EQ(req.scope, "key_1");
  EXPECT_EQ(req.daily_limit_micros, 5000);
  EXPECT_FALSE(req.image);
  EXPECT_GE(req.deadline, before);
  EXPECT_LE(req.deadline, steady_clock::now());  // no Prefer: wait, no room wait
  ASSERT_TRUE(req.cancelled);
  EXPECT_FALSE(req.cancelled());
  ex.gone = true;
  EXPECT_TRUE(req.cancelled());
}

TEST(LaunchForTest, AnAdminSeesEveryKeysImagesAndSnapshots) {
  GoneExchange ex;
  SetCaller(ex, Caller{"key_admin", true, std::nullopt});
  launch::LaunchRequest req = LaunchFor(ex, {});
  EXPECT_EQ(req.spec.owner, "key_admin");
  EXPECT_FALSE(req.scope);
  EXPECT_FALSE(req.daily_limit_micros);
}

TEST(LaunchForTest, TheDeadlineIsTheLaterOfPreferWaitAndTheRoomWait) {
  GoneExchange ex;
  SetCaller(ex, Caller{"key_1", false, std::nullopt});
  auto now = steady_clock::now();
  launch::LaunchRequest waits = LaunchFor(ex, {}, seconds(15));
  EXPECT_GE(waits.deadline, now + seconds(15));
  EXPECT_LT(waits.deadline, now + seconds(16));
  ex.headers_ = {{"Prefer", "wait=30"}};
  launch::LaunchRequest prefers = LaunchFor(ex, {}, seconds(15));
  EXPECT_GE(prefers.deadline, now + seconds(30));
  EXPECT_LT(prefers.deadline, now + seconds(31));
  EXPECT_GE(LaunchFor(ex, {}).deadline, now + seconds(30));
}

}  // namespace
}  // namespace context_test
}  // namespace kiln::api
