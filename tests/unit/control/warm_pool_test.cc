// The real WarmPool over a FakeEngine and a real SnapshotStore holding a
// snapshot captured by the fake and sealed for real.
#include "control/warm_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "fakes/fake_engine.h"
#include "unit/support/temp_dir.h"

namespace kiln::control {
namespace warm_pool_test {
namespace {

using fakes::FakeEngine;
using fakes::WaitUntil;
using std::chrono::milliseconds;
using testutil::TempDir;

class WarmPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A sandbox to capture, captured and sealed as the manager does.
    engine::CreateParams params{"source", Shape{}, "/fake/rootfs"};
    ASSERT_TRUE(engine_.Create(params).ok());
    auto stats = engine_.Checkpoint("source", snapshots_.CheckpointDir("snap"));
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    store::SnapshotRecord rec;
    rec.id = "snap";
    rec.owner = "key_a";
    rec.source_sandbox_id = "source";
    rec.shape.memory_mib = 512;
    rec.created_ms = 1;
    rec.expires_ms = rec.created_ms + 86400000;
    rec.size_bytes = stats->bytes;
    Status sealed = snapshots_.Seal(rec);
    ASSERT_TRUE(sealed.ok()) << sealed.ToString();
    engine_.Destroy("source");
    pool_ = std::make_unique<WarmPool>(engine_, "/fake/rootfs", snapshots_, Options());
  }
  void TearDown() override { pool_.reset(); }

  // The host clock is the test's: `wall_offset_` moves as a step would.
  WarmPoolOptions Options() {
    WarmPoolOptions o;
    o.wall_offset_ms = [this] { return wall_offset_.load(); };
    return o;
  }

  bool Ready(int n) {
    return WaitUntil([&] { return pool_->StatusOf("snap").ready == n; });
  }
  std::vector<std::string> Restored() { return engine_.calls().restored; }
  // Copies on the host now (the pool's), by id.
  std::set<std::string> Live() {
    auto ids = engine_.List();
    return {ids.begin(), ids.end()};
  }

  FakeEngine engine_;
  TempDir dir_;
  store::SnapshotStore snapshots_{dir_.path()};
  std::atomic<int64_t> wall_offset_{1'000'000};
  std::unique_ptr<WarmPool> pool_;
};

TEST_F(WarmPoolTest, ResizeFillsEveryCopy) {
  pool_->Resize("snap", 3);
  ASSERT_TRUE(Ready(3));
  PoolStatus st = pool_->StatusOf("snap");
  EXPECT_EQ(st.size, 3);
  auto restored = Restored();
  ASSERT_EQ(restored.size(), 3u);
  EXPECT_EQ(Live(), std::set<std::string>(restored.begin(), restored.end()));
  for (const auto& dir : engine_.calls().restore_dirs)
    EXPECT_EQ(dir, snapshots_.CheckpointDir("snap"));
  // Memory is reported from the engine.
  for (const auto& id : restored) engine_.SetMemory(id, 1000);
  EXPECT_EQ(pool_->StatusOf("snap").memory_bytes, 3000u);
  EXPECT_EQ(pool_->StatusAll().count("snap"), 1u);
}

TEST_F(WarmPoolTest, TakeHandsOutACopyWithoutWakingItAndRefills) {
  pool_->Resize("snap", 2);
  ASSERT_TRUE(Ready(2));
  auto copy = pool_->Take("snap", "key");
  ASSERT_TRUE(copy);
  // Checked from the host: the create's first command is the copy's first call.
  EXPECT_EQ(engine_.channel(copy->id)->Count("ping"), 0);
  EXPECT_EQ(copy->channel, std::shared_ptr<engine::AgentChannel>(engine_.channel(copy->id)));
  // Refilled in the background; the copy handed out is no longer the pool's.
  ASSERT_TRUE(WaitUntil([&] { return Restored().size() == 3; }));
  ASSERT_TRUE(Ready(2));
  pool_->Drop("snap");
  EXPECT_EQ(Live(), std::set<std::string>{copy->id});
}

TEST_F(WarmPoolTest, TakeFromAnEmptyOrUnknownPoolIsNothing) {
  EXPECT_FALSE(pool_->Take("snap", "key"));
  EXPECT_FALSE(pool_->Take("other", "key"));
  EXPECT_TRUE(Restored().empty());
}

TEST_F(WarmPoolTest, DropDestroysEveryPooledCopy) {
  pool_->Resize("snap", 3);
  ASSERT_TRUE(Ready(3));
  pool_->Drop("snap");
  EXPECT_TRUE(Live().empty());
  auto destroyed = engine_.calls().destroyed;
  for (const auto& id : Restored())
    EXPECT_NE(std::find(destroyed.begin(), destroyed.end(), id), destroyed.end()) << id;
  EXPECT_EQ(pool_->StatusOf("snap").size, 0);
  EXPECT_TRUE(pool_->StatusAll().empty());
  EXPECT_FALSE(pool_->Take("snap", "key"));
}

TEST_F(WarmPoolTest, ShrinkingDestroysTheExtraCopies) {
  pool_->Resize("snap", 3);
  ASSERT_TRUE(Ready(3));
  pool_->Resize("snap", 1);
  EXPECT_EQ(pool_->StatusOf("snap").ready, 1);
  EXPECT_EQ(Live().size(), 1u);
  pool_->Resize("snap", 0);
  EXPECT_TRUE(Live().empty());
  // Pinned at zero: kept (demand does not fill it), holding nothing.
  PoolStatus s = pool_->StatusOf("snap");
  EXPECT_TRUE(s.pinned);
  EXPECT_EQ(s.size, 0);
  EXPECT_EQ(s.ready, 0);
  pool_->Resize("snap", std::nullopt);
  EXPECT_TRUE(pool_->StatusAll().empty());
}

TEST_F(WarmPoolTest, ADeadCopyIsDiscardedAndTheNextHandedOut) {
  // Filled one at a time, so the first restored is first in line.
  pool_->Resize("snap", 1);
  ASSERT_TRUE(Ready(1));
  pool_->Resize("snap", 2);
  ASSERT_TRUE(Ready(2));
  auto restored = Restored();
  std::string first = restored[0], second = restored[1];
  ASSERT_TRUE(engine_.Kill(first));  // its gVisor exited while it waited
  auto copy = pool_->Take("snap", "key");
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->id, second);
  EXPECT_FALSE(engine_.Has(first));  // destroyed, not handed out
}

TEST_F(WarmPoolTest, ACopyRestoredBeforeAHostClockStepIsDiscarded) {
  pool_->Resize("snap", 1);
  ASSERT_TRUE(Ready(1));
  std::string old = Restored()[0];
  wall_offset_ += 86'400'000;  // the host clock jumps a day ahead
  // Refilled after the step: that copy read the new time.
  pool_->Resize("snap", 2);
  ASSERT_TRUE(Ready(2));
  auto copy = pool_->Take("snap", "key");
  ASSERT_TRUE(copy);
  EXPECT_NE(copy->id, old);
  EXPECT_FALSE(engine_.Has(old));  // destroyed, not handed out
  // Within a second is no step (NTP's slews and the two clocks' reads).
  pool_->Resize("snap", 1);
  ASSERT_TRUE(Ready(1));
  wall_offset_ -= 900;
  EXPECT_TRUE(pool_->Take("snap", "key"));
}

TEST_F(WarmPoolTest, ACopyWhoseChannelEndedIsDiscarded) {
  // Filled one at a time, so the first restored is first in line.
  pool_->Resize("snap", 1);
  ASSERT_TRUE(Ready(1));
  pool_->Resize("snap", 2);
  ASSERT_TRUE(Ready(2));
  auto restored = Restored();
  std::string first = restored[0], second = restored[1];
  engine_.channel(first)->Close();  // kiln gave up on its agent
  auto copy = pool_->Take("snap", "key");
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->id, second);
  EXPECT_FALSE(engine_.Has(first));  // destroyed, not handed out
}

TEST_F(WarmPoolTest, ABrokenSnapshotBacksOffAndSaysWhy) {
  engine_.FailNextRestores(1000);
  pool_->Resize("snap", 3);
  ASSERT_TRUE(
      WaitUntil([&] { return pool_->StatusOf("snap").unfilled_reason == "restore_failed"; }));
  PoolStatus s = pool_->StatusOf("snap");
  EXPECT_EQ(s.size, 3);  // still pinned: it fills once restores work again
  EXPECT_EQ(s.ready, 0);
  size_t attempts = Restored().size();
  EXPECT_GE(attempts, 1u);
  // Backed off: nothing retries within the next 100 ms (the first retry is
  // a second later).
  EXPECT_FALSE(WaitUntil([&] { return Restored().size() > attempts + 2; }, milliseconds(100)));
  EXPECT_TRUE(Live().empty());
  // Restores work again: the retry fills it, and the reason is gone.
  engine_.FailNextRestores(0);
  ASSERT_TRUE(WaitUntil([&] { return pool_->StatusOf("snap").ready == 3; }, milliseconds(10000)));
  EXPECT_EQ(pool_->StatusOf("snap").unfilled_reason, "");
}

TEST_F(WarmPoolTest, ACorruptedSnapshotIsNeverRestored) {
  std::ofstream(snapshots_.CheckpointDir("snap") + "/checkpoint.img", std::ios::app) << "x";
  pool_->Resize("snap", 2);
  ASSERT_TRUE(
      WaitUntil([&] { return pool_->StatusOf("snap").unfilled_reason == "restore_failed"; }));
  EXPECT_TRUE(Restored().empty());
}

TEST_F(WarmPoolTest, CopiesWaitAtThePoolWeightAndAreRaisedAtHandOut) {
  pool_->Resize("snap", 2);
  ASSERT_TRUE(Ready(2));
  for (const auto& id : Restored()) EXPECT_EQ(engine_.CpuWeight(id), engine::kPoolCpuWeight);
  auto copy = pool_->Take("snap", "key");
  ASSERT_TRUE(copy);
  EXPECT_EQ(engine_.CpuWeight(copy->id), engine::kStartupCpuWeight);
}

TEST_F(WarmPoolTest, AnImagesWarmCopyFillsWithItsFirstCreateAndAUserSnapshotWithItsSecond) {
  pool_.reset();
  WarmPoolOptions o = Options();
  o.adaptive = true;
  pool_ = std::make_unique<WarmPool>(engine_, "/fake/rootfs", snapshots_, o);
  pool_->Arrived("snap", /*image_warm=*/false);
  EXPECT_FALSE(WaitUntil([&] { return !Restored().empty(); }, milliseconds(200)));
  pool_->Arrived("snap", false);
  ASSERT_TRUE(Ready(2));  // two creates at once: a burst of two
  PoolStatus s = pool_->StatusOf("snap");
  EXPECT_FALSE(s.pinned);
  EXPECT_EQ(s.wanted, 2);
  // A burst asks for its size.
  for (int i = 0; i < 4; ++i) pool_->Arrived("snap", false);
  EXPECT_TRUE(Ready(6));
}

TEST_F(WarmPoolTest, AnIdlePoolShrinksToZero) {
  pool_.reset();
  WarmPoolOptions o = Options();
  o.adaptive = true;
  o.sizer.idle_ms = 300;
  pool_ = std::make_unique<WarmPool>(engine_, "/fake/rootfs", snapshots_, o);
  pool_->Arrived("snap", true);
  ASSERT_TRUE(Ready(1));
  ASSERT_TRUE(WaitUntil([&] { return pool_->StatusAll().empty(); }, milliseconds(3000)));
  EXPECT_TRUE(WaitUntil([&] { return Live().empty(); }));  // destroyed outside the lock
}

TEST_F(WarmPoolTest, TheMemoryBudgetLimitsAPoolAndSaysSo) {
  pool_.reset();
  WarmPoolOptions o = Options();
  o.adaptive = true;
  o.sizer.budget_bytes = 1;  // less than any copy
  pool_ = std::make_unique<WarmPool>(engine_, "/fake/rootfs", snapshots_, o);
  pool_->Arrived("snap", true);
  PoolStatus s = pool_->StatusOf("snap");
  EXPECT_EQ(s.size, 0);
  EXPECT_EQ(s.wanted, 1);
  EXPECT_EQ(s.unfilled_reason, "memory_budget");
  EXPECT_FALSE(WaitUntil([&] { return !Restored().empty(); }, milliseconds(200)));
  // A pin is not the budget's.
  pool_->Resize("snap", 1);
  EXPECT_TRUE(Ready(1));
}

TEST_F(WarmPoolTest, PinsAreKeptAcrossRestartsAndAutoUnpins) {
  std::string pins = dir_.path() + "/pool-pins.json";
  pool_.reset();
  WarmPoolOptions o = Options();
  o.adaptive = true;
  o.pins_path = pins;
  pool_ = std::make_unique<WarmPool>(engine_, "/fake/rootfs", snapshots_, o);
  pool_->Resize("snap", 2);
  ASSERT_TRUE(Ready(2));
  pool_.reset();
  EXPECT_TRUE(Live().empty());
  pool_ = std::make_unique<WarmPool>(engine_, "/fake/rootfs", snapshots_, o);
  pool_->LoadPins();
  ASSERT_TRUE(Ready(2));
  EXPECT_TRUE(pool_->StatusOf("snap").pinned);
  pool_->Resize("snap", std::nullopt);  // back to demand: none yet
  ASSERT_TRUE(WaitUntil([&] { return pool_->StatusAll().empty(); }));
  pool_.reset();
  pool_ = std::make_unique<WarmPool>(engine_, "/fake/rootfs", snapshots_, o);
  pool_->LoadPins();
  EXPECT_TRUE(pool_->StatusAll().empty());
}

TEST_F(WarmPoolTest, DestructionDestroysThePooledCopies) {
  pool_->Resize("snap", 2);
  ASSERT_TRUE(Ready(2));
  pool_.reset();
  EXPECT_TRUE(Live().empty());
}

}  // namespace
}  // namespace warm_pool_test
}  // namespace kiln::control
