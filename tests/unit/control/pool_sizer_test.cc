#include "control/pool_sizer.h"

#include <gtest/gtest.h>

namespace kiln::control {
namespace {

PoolSizerOptions Options() {
  PoolSizerOptions o;
  o.budget_bytes = 0;
  o.max_size = 32;
  o.idle_ms = 300'000;
  return o;
}

TEST(PoolSizerTest, AnImagesWarmCopyEarnsAPoolWithItsFirstCreate) {
  PoolSizer sizer(Options());
  sizer.Arrived("img", 1000, /*image_warm=*/true);
  auto plan = sizer.Plan(1000);
  ASSERT_EQ(plan.count("img"), 1u);
  EXPECT_EQ(plan["img"].size, 1);
  EXPECT_EQ(plan["img"].limit, PoolLimit::kNone);
}

TEST(PoolSizerTest, AUserSnapshotEarnsAPoolWithItsSecondCreate) {
  PoolSizer sizer(Options());
  sizer.Arrived("snap", 1000, false);
  EXPECT_TRUE(sizer.Plan(1000).empty());
  sizer.Arrived("snap", 5000, false);
  EXPECT_EQ(sizer.Plan(5000)["snap"].size, 1);
}

TEST(PoolSizerTest, SteadyCreatesAskForTwiceWhatArrivesDuringARestore) {
  PoolSizer sizer(Options());
  // 20 creates a second for 10 s, restores of 300 ms: 6 arrive per restore.
  for (int i = 0; i < 200; ++i) sizer.Arrived("img", 1000 + i * 50, true);
  for (int i = 0; i < 8; ++i) sizer.Restored("img", 300, 20 << 20);
  auto plan = sizer.Plan(11000);
  EXPECT_GE(plan["img"].size, 11);
  EXPECT_LE(plan["img"].size, 13);
}

TEST(PoolSizerTest, ABurstAsksForItsWholeSize) {
  PoolSizer sizer(Options());
  for (int i = 0; i < 30; ++i) sizer.Arrived("img", 1000 + i, true);
  EXPECT_EQ(sizer.Plan(2000)["img"].size, 30);
  // Still remembered within the window, forgotten after it.
  EXPECT_EQ(sizer.Plan(50'000)["img"].size, 30);
  EXPECT_LT(sizer.Plan(62'000)["img"].size, 30);
}

TEST(PoolSizerTest, ThePerPoolCapSaysSo) {
  auto o = Options();
  o.max_size = 8;
  PoolSizer sizer(o);
  for (int i = 0; i < 30; ++i) sizer.Arrived("img", 1000, true);
  auto plan = sizer.Plan(1000);
  EXPECT_EQ(plan["img"].demand, 30);
  EXPECT_EQ(plan["img"].size, 8);
  EXPECT_EQ(plan["img"].limit, PoolLimit::kMaxSize);
}

TEST(PoolSizerTest, OverBudgetTheLargestPoolGivesUpCopiesFirst) {
  auto o = Options();
  o.budget_bytes = 100 << 20;
  PoolSizer sizer(o);
  for (int i = 0; i < 10; ++i) sizer.Arrived("big", 1000, true);
  for (int i = 0; i < 2; ++i) sizer.Arrived("small", 1000, true);
  sizer.Restored("big", 200, 10 << 20);
  sizer.Restored("small", 200, 10 << 20);
  auto plan = sizer.Plan(1000);
  EXPECT_EQ(plan["small"].size, 2);
  EXPECT_EQ(plan["small"].limit, PoolLimit::kNone);
  EXPECT_EQ(plan["big"].size, 8);
  EXPECT_EQ(plan["big"].demand, 10);
  EXPECT_EQ(plan["big"].limit, PoolLimit::kBudget);
}

TEST(PoolSizerTest, ABudgetSmallerThanOneCopyLeavesEveryPoolEmptyAndSaysWhy) {
  auto o = Options();
  o.budget_bytes = 1 << 20;
  PoolSizer sizer(o);
  sizer.Arrived("img", 1000, true);
  sizer.Restored("img", 200, 20 << 20);
  auto plan = sizer.Plan(1000);
  EXPECT_EQ(plan["img"].size, 0);
  EXPECT_EQ(plan["img"].limit, PoolLimit::kBudget);
}

TEST(PoolSizerTest, AnIdlePoolGoesToZeroAndIsForgotten) {
  PoolSizer sizer(Options());
  sizer.Arrived("img", 1000, true);
  EXPECT_EQ(sizer.Plan(200'000)["img"].size, 1);
  EXPECT_TRUE(sizer.Plan(301'000).empty());
  // Forgotten: a user snapshot has to earn its pool again.
  sizer.Arrived("snap", 400'000, false);
  EXPECT_TRUE(sizer.Plan(400'000).empty());
}

TEST(PoolSizerTest, OneSlowRestoreDoesNotDoubleAPool) {
  PoolSizer sizer(Options());
  for (int i = 0; i < 100; ++i) sizer.Arrived("img", 1000 + i * 100, true);  // 10/s
  for (int i = 0; i < 8; ++i) sizer.Restored("img", 200, 20 << 20);
  int before = sizer.Plan(11'000)["img"].size;
  sizer.Restored("img", 2000, 20 << 20);
  int after = sizer.Plan(11'000)["img"].size;
  EXPECT_EQ(before, 4);
  EXPECT_LE(after, 2 * before);
  EXPECT_GT(after, before);
}

}  // namespace
}  // namespace kiln::control
