#include "api/rate_limit.h"

#include <gtest/gtest.h>

#include "api/stream_limit.h"

namespace kiln::api {
namespace rate_limit_test {
namespace {

TEST(TokenBucketTest, SpendsTheBurstThenTheRate) {
  TokenBucket b(/*rate=*/2, /*burst=*/3, /*now_ms=*/0);
  EXPECT_TRUE(b.Take(0));
  EXPECT_TRUE(b.Take(0));
  EXPECT_TRUE(b.Take(0));
  int64_t wait = 0;
  EXPECT_FALSE(b.Take(0, &wait));
  EXPECT_EQ(wait, 500);  // one token every 500 ms at 2/s
  EXPECT_FALSE(b.Take(499, &wait));
  EXPECT_GE(wait, 1);  // 1 ms, give or take the rounding of a double
  EXPECT_LE(wait, 2);
  EXPECT_TRUE(b.Take(500));
  EXPECT_FALSE(b.Take(500));
}

TEST(TokenBucketTest, SavesNoMoreThanTheBurst) {
  TokenBucket b(10, 2, 0);
  EXPECT_TRUE(b.Take(0));
  EXPECT_FALSE(b.Full(0));
  EXPECT_TRUE(b.Full(100));
  // An hour idle still buys only the burst.
  EXPECT_TRUE(b.Take(3'600'000));
  EXPECT_TRUE(b.Take(3'600'000));
  EXPECT_FALSE(b.Take(3'600'000));
}

TEST(TokenBucketTest, AClockThatGoesBackGivesNothing) {
  TokenBucket b(1, 1, 10'000);
  EXPECT_TRUE(b.Take(10'000));
  EXPECT_FALSE(b.Take(5'000));
  EXPECT_FALSE(b.Take(10'500));
  EXPECT_TRUE(b.Take(11'000));
}

class RateLimiterTest : public ::testing::Test {
 protected:
  int64_t now_ = 1'000'000;
  RateLimiter::Clock clock_ = [this] { return now_; };
};

TEST_F(RateLimiterTest, OffByDefault) {
  RateLimiter off({}, clock_);
  EXPECT_FALSE(off.enabled());
  for (int i = 0; i < 10000; ++i) ASSERT_FALSE(off.Take("key:a"));
  EXPECT_EQ(off.size(), 0u);
}

TEST_F(RateLimiterTest, BurstDefaultsToTwiceTheRate) {
  EXPECT_EQ(RateLimiter({5, 0}, clock_).burst(), 10);
  EXPECT_EQ(RateLimiter({0.2, 0}, clock_).burst(), 1);
  EXPECT_EQ(RateLimiter({5, 7}, clock_).burst(), 7);
}

TEST_F(RateLimiterTest, EachCallerHasItsOwnBucket) {
  RateLimiter limiter({/*rate=*/1, /*burst=*/2}, clock_);
  EXPECT_FALSE(limiter.Take("key:a"));
  EXPECT_FALSE(limiter.Take("key:a"));
  auto wait = limiter.Take("key:a");
  ASSERT_TRUE(wait);
  EXPECT_EQ(*wait, 1);
  // A's flood leaves B's bucket alone.
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(limiter.Take("key:a"));
  EXPECT_FALSE(limiter.Take("key:b"));
  EXPECT_FALSE(limiter.Take("key:b"));
  EXPECT_TRUE(limiter.Take("key:b"));
  // After the wait it said, A goes on.
  now_ += 1000;
  EXPECT_FALSE(limiter.Take("key:a"));
  EXPECT_TRUE(limiter.Take("key:a"));
}

TEST_F(RateLimiterTest, RetryAfterIsWholeSecondsAndAtLeastOne) {
  RateLimiter fast({100, 1}, clock_);
  EXPECT_FALSE(fast.Take("ip:1"));
  EXPECT_EQ(fast.Take("ip:1"), 1);  // 10 ms away, rounded up to 1 s
  RateLimiter slow({0.25, 1}, clock_);
  EXPECT_FALSE(slow.Take("ip:1"));
  EXPECT_EQ(slow.Take("ip:1"), 4);
  now_ += 2500;
  EXPECT_EQ(slow.Take("ip:1"), 2);  // 1.5 s left, rounded up
}

TEST_F(RateLimiterTest, FullBucketsAreDropped) {
  RateLimiter limiter({10, 10}, clock_);
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(limiter.Take("ip:10.0.0." + std::to_string(i)));
  EXPECT_EQ(limiter.size(), 50u);
  now_ += 61'000;  // every bucket refilled; the next call sweeps
  EXPECT_FALSE(limiter.Take("ip:new"));
  EXPECT_EQ(limiter.size(), 1u);
}

TEST(StreamLimiterTest, RefusesPastTheCapUntilOneCloses) {
  StreamLimiter limiter(2);
  auto a = limiter.TryOpen("sb_1");
  auto b = limiter.TryOpen("sb_1");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(limiter.TryOpen("sb_1"), nullptr);
  EXPECT_EQ(limiter.open("sb_1"), 2);
  // A neighbour is counted apart.
  auto c = limiter.TryOpen("sb_2");
  EXPECT_TRUE(c);
  a.reset();
  EXPECT_EQ(limiter.open("sb_1"), 1);
  EXPECT_TRUE(limiter.TryOpen("sb_1"));  // opened and at once released
  EXPECT_EQ(limiter.open("sb_1"), 1);
  b.reset();
  c.reset();
  EXPECT_EQ(limiter.open("sb_1"), 0);
  EXPECT_EQ(limiter.open("sb_2"), 0);
}

TEST(StreamLimiterTest, ZeroMeansNoCap) {
  StreamLimiter limiter(0);
  std::vector<std::shared_ptr<void>> held;
  for (int i = 0; i < 1000; ++i) held.push_back(limiter.TryOpen("sb"));
  for (const auto& h : held) ASSERT_TRUE(h);
  EXPECT_EQ(limiter.open("sb"), 1000);
}

}  // namespace
}  // namespace rate_limit_test
}  // namespace kiln::api
