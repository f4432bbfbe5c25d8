// launch::Launcher over the real SandboxManager on a FakeEngine: a launch
// checks the key's spending limit, runs for its owner, answers a live
// sandbox of the name for get_or_create and gives up with its deadline or
// its caller; the other calls that start billing (fork, wake, extend) obey
// the payer's spending limit too, so no front has to check it.
#include "launch/launcher.h"

#include <gtest/gtest.h>

#include <chrono>

#include "fakes/fake_engine.h"
#include "store/db.h"
#include "unit/support/temp_dir.h"

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

  // A request of `owner` for a default-size sandbox, with no image (this
  // launcher serves none) and no spending limit.
  static LaunchRequest Request(const std::string& owner) {
    LaunchRequest r;
    r.spec.owner = owner;
    r.spec.shape.vcpu = 1;
    r.spec.shape.memory_mib = 1024;
    r.spec.timeout_seconds = 600;
    r.deadline = Soon();
    return r;
  }

  const Payer kSpent{"key_a", 0};  // a daily limit of 0: spent already
  const Payer kFree{"key_a", std::nullopt};

  fakes::FakeEngine engine_;
  testutil::TempDir dir_{"kiln-launcher"};
  store::SnapshotStore snapshots_{dir_.path()};
  store::Db db_{":memory:"};
  store::SandboxStore records_{db_};
  store::UsageStore usage_{db_};
  std::unique_ptr<control::Capacity> capacity_;
  std::unique_ptr<control::SandboxManager> manager_;
  std::unique_ptr<Launcher> launcher_;
  std::shared_ptr<control::Sandbox> source_;
};

TEST_F(LauncherTest, ACreatePastTheLimitStartsNothing) {
  LaunchRequest request = Request("key_a");
  request.daily_limit_micros = 0;
  auto refused = launcher_->Launch(request);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kSpendingLimitReached);
  EXPECT_EQ(engine_.calls().created.size(), 1u);  // the fixture's source only
}

TEST_F(LauncherTest, ACreateRunsForTheRequestsOwner) {
  LaunchRequest request = Request("key_b");
  request.spec.name = "web";
  request.daily_limit_micros = 1'000'000'000;  // far from spent
  auto launched = launcher_->Launch(request);
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  const std::shared_ptr<control::Sandbox>& sandbox = launched->sandbox;
  ASSERT_NE(sandbox, nullptr);
  EXPECT_EQ(sandbox->state(), SandboxState::kRunning);
  EXPECT_EQ(sandbox->spec().owner, "key_b");
  EXPECT_FALSE(launched->reused);
  EXPECT_EQ(launched->in_use, nullptr);
  EXPECT_TRUE(launched->start.is_null());  // no image, no start command
  EXPECT_TRUE(engine_.Has(sandbox->id()));
  EXPECT_EQ(manager_->Get(sandbox->id()), sandbox);
  EXPECT_EQ(manager_->FindByName("key_b", "web"), sandbox);
  EXPECT_EQ(manager_->FindByName("key_a", "web"), nullptr);
}

TEST_F(LauncherTest, GetOrCreateAnswersTheOwnersLiveSandboxOfTheName) {
  LaunchRequest request = Request("key_b");
  request.spec.name = "web";
  request.get_or_create = true;
  auto first = launcher_->Launch(request);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->reused);
  auto again = launcher_->Launch(request);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->reused);
  EXPECT_EQ(again->sandbox, first->sandbox);
  EXPECT_NE(again->in_use, nullptr);
  EXPECT_EQ(engine_.calls().created.size(), 2u);  // the source and the first

  // Without get_or_create the name is taken; another key's name is its own.
  request.get_or_create = false;
  auto taken = launcher_->Launch(request);
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(taken.status().code(), Code::kNameTaken);
  LaunchRequest other = Request("key_c");
  other.spec.name = "web";
  other.get_or_create = true;
  auto theirs = launcher_->Launch(other);
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  EXPECT_FALSE(theirs->reused);
  EXPECT_NE(theirs->sandbox, first->sandbox);
  EXPECT_EQ(theirs->sandbox->spec().owner, "key_c");
}

TEST_F(LauncherTest, AnExpiredDeadlineDoesNotWaitForRoom) {
  LaunchRequest request = Request("key_b");
  request.spec.shape.memory_mib = 8192;  // the whole host; the source holds 1024
  request.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  auto refused = launcher_->Launch(request);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kNoCapacity);
  EXPECT_EQ(engine_.calls().created.size(), 1u);
}

TEST_F(LauncherTest, ACallerThatHungUpStopsWaitingForRoom) {
  LaunchRequest request = Request("key_b");
  request.spec.shape.memory_mib = 8192;
  request.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  request.cancelled = [] { return true; };
  auto began = std::chrono::steady_clock::now();
  auto refused = launcher_->Launch(request);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kNoCapacity);
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(10));
  EXPECT_EQ(engine_.calls().created.size(), 1u);
}

TEST_F(LauncherTest, WhatItCannotFindIsNotFound) {
  LaunchRequest from_snapshot = Request("key_a");
  from_snapshot.spec.snapshot = "snap_absent";
  auto no_snapshot = launcher_->Launch(from_snapshot);
  ASSERT_FALSE(no_snapshot.ok());
  EXPECT_EQ(no_snapshot.status().code(), Code::kSnapshotNotFound);
  LaunchRequest from_image = Request("key_a");
  from_image.image = "web:v1";
  auto no_image = launcher_->Launch(from_image);  // this launcher serves no images
  ASSERT_FALSE(no_image.ok());
  EXPECT_EQ(no_image.status().code(), Code::kImageNotFound);
  EXPECT_EQ(engine_.calls().created.size(), 1u);
}

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
