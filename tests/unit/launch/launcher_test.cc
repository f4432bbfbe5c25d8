// launch::Launcher over the real SandboxManager on a FakeEngine: the calls
// besides Launch that start billing (fork, wake, extend) obey the payer's
// spending limit, so no front has to check it.
#include "launch/launcher.h"

#include <gtest/gtest.h>

#include <chrono>

#include "fakes/fake_engine.h"
#include "store/db.h"

namespace kiln::launch {
namespace launcher_test {
namespace {

using control::SandboxState;

control::Deadline Soon() { return std::chrono::steady_clock::now() + std::chrono::seconds(1); }

class LauncherTest : public ::testing::Test {
 protected:
  LauncherTest() {
    control::CapacityLimits limits;
    limits.host_memory_mib = 8192;
    limits.host_vcpus = 8;
    capacity_ = std::make_unique<control::Capacity>(limits);
    manager_ = std::make_unique<control::SandboxManager>(
        control::ManagerDeps{engine_, "/fake/rootfs", snapshots_, records_, usage_, *capacity_,
                             nullptr},
        control::ManagerOptions{});
    launcher_ = std::make_unique<Launcher>(*manager_, nullptr);
    control::SandboxSpec spec;
    spec.owner = "key_a";
    spec.shape.vcpu = 1;
    spec.shape.memory_mib = 1024;
    spec.timeout_seconds = 600;
    auto made = manager_->Create(spec, Soon());
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    source_ = *made;
  }

  const Payer kSpent{"key_a", 0};  // a daily limit of 0: spent already
  const Payer kFree{"key_a", std::nullopt};

  fakes::FakeEngine engine_;
  fakes::TempDir dir_;
  store::SnapshotStore snapshots_{dir_.path()};
  store::Db db_{":memory:"};
  store::SandboxStore records_{db_};
  store::UsageStore usage_{db_};
  std::unique_ptr<control::Capacity> capacity_;
  std::unique_ptr<control::SandboxManager> manager_;
  std::unique_ptr<Launcher> launcher_;
  std::shared_ptr<control::Sandbox> source_;
};

TEST_F(LauncherTest, AForkPastTheLimitStartsNothing) {
  auto refused = launcher_->Fork(source_, control::ForkOptions{}, Soon(), kSpent);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kSpendingLimitReached);
  EXPECT_TRUE(engine_.calls().checkpointed.empty());
  EXPECT_TRUE(engine_.calls().restored.empty());
  auto forked = launcher_->Fork(source_, control::ForkOptions{}, Soon(), kFree);
  ASSERT_TRUE(forked.ok());
  EXPECT_TRUE(forked->status.ok()) << forked->status.ToString();
  EXPECT_EQ(forked->copies.size(), 1u);
}

TEST_F(LauncherTest, AnExtendPastTheLimitKeepsTheLease) {
  int64_t before = source_->expires_ms();
  auto refused = launcher_->Extend(source_, 60, kSpent);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kSpendingLimitReached);
  EXPECT_EQ(source_->expires_ms(), before);
  auto extended = launcher_->Extend(source_, 60, kFree);
  ASSERT_TRUE(extended.ok()) << extended.status().ToString();
  EXPECT_GT(source_->expires_ms(), before);
}

TEST_F(LauncherTest, AWakePastTheLimitLeavesItPaused) {
  ASSERT_TRUE(manager_->Pause(source_, "requested").ok());
  ASSERT_EQ(source_->state(), SandboxState::kPaused);
  Status refused = launcher_->Wake(source_, std::nullopt, Soon(), kSpent);
  EXPECT_EQ(refused.code(), Code::kSpendingLimitReached);
  EXPECT_EQ(source_->state(), SandboxState::kPaused);
  EXPECT_TRUE(launcher_->Wake(source_, std::nullopt, Soon(), kFree).ok());
  EXPECT_EQ(source_->state(), SandboxState::kRunning);
}

}  // namespace
}  // namespace launcher_test
}  // namespace kiln::launch
