#include "control/fair_slots.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace kiln::control {
namespace fair_slots_test {
namespace {

using Clock = std::chrono::steady_clock;

bool WaitUntil(const std::function<bool()>& pred) {
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// One request of `key` that waits for its slot on a thread of its own.
struct Waiting {
  Waiting(FairSlots& slots, std::string key) {
    thread = std::thread([this, &slots, key] {
      result = slots.Take(
          key, [this] { return gone.load(); }, &slot, 5);
      granted = result == FairSlots::Result::kGranted;
    });
  }
  ~Waiting() {
    gone = true;
    if (thread.joinable()) thread.join();
  }
  void Release() {
    thread.join();
    slot.reset();
  }
  std::atomic<bool> gone{false}, granted{false};
  FairSlots::Result result{};
  std::shared_ptr<void> slot;
  std::thread thread;
};

TEST(FairSlotsTest, OneKeyHoldsAtMostItsShareAndLeavesTheRestToOthers) {
  FairSlots slots({.limit = 4, .per_key = 3, .queue_per_key = 16});
  std::vector<std::unique_ptr<Waiting>> a;
  for (int i = 0; i < 6; ++i) a.push_back(std::make_unique<Waiting>(slots, "a"));
  ASSERT_TRUE(WaitUntil([&] { return slots.running("a") == 3 && slots.waiting("a") == 3; }));
  // A slot is free, and it is b's, however many of a's wait.
  Waiting b(slots, "b");
  ASSERT_TRUE(WaitUntil([&] { return b.granted.load(); }));
  EXPECT_EQ(slots.running("a"), 3);
}

TEST(FairSlotsTest, FreedSlotsGoToTheWaitingKeysInTurn) {
  FairSlots slots({.limit = 1, .per_key = 1, .queue_per_key = 16});
  std::shared_ptr<void> held;
  ASSERT_EQ(slots.Take("x", nullptr, &held), FairSlots::Result::kGranted);
  std::vector<std::unique_ptr<Waiting>> a, b;
  for (int i = 0; i < 3; ++i) {  // one by one: their order in the line is a's order
    a.push_back(std::make_unique<Waiting>(slots, "a"));
    ASSERT_TRUE(WaitUntil([&] { return slots.waiting("a") == i + 1; }));
  }
  b.push_back(std::make_unique<Waiting>(slots, "b"));
  ASSERT_TRUE(WaitUntil([&] { return slots.waiting("b") == 1; }));
  // a came first, so it is served first; then b, though a has more waiting.
  held.reset();
  ASSERT_TRUE(WaitUntil([&] { return a[0]->granted.load(); }));
  a[0]->Release();
  ASSERT_TRUE(WaitUntil([&] { return b[0]->granted.load(); }));
  EXPECT_FALSE(a[1]->granted);
  b[0]->Release();
  ASSERT_TRUE(WaitUntil([&] { return a[1]->granted.load(); }));
}

TEST(FairSlotsTest, AKeysLineIsCappedAndOthersStillGetIn) {
  FairSlots slots({.limit = 1, .per_key = 1, .queue_per_key = 2});
  std::shared_ptr<void> held;
  ASSERT_EQ(slots.Take("a", nullptr, &held), FairSlots::Result::kGranted);
  Waiting w1(slots, "a"), w2(slots, "a");
  ASSERT_TRUE(WaitUntil([&] { return slots.waiting("a") == 2; }));
  std::shared_ptr<void> refused;
  EXPECT_EQ(slots.Take("a", nullptr, &refused), FairSlots::Result::kQueueFull);
  EXPECT_FALSE(refused);
  Waiting b(slots, "b");
  ASSERT_TRUE(WaitUntil([&] { return slots.waiting("b") == 1; }));
}

TEST(FairSlotsTest, AWaiterWhoseClientLeftGivesUpItsPlace) {
  FairSlots slots({.limit = 1, .per_key = 1, .queue_per_key = 4});
  std::shared_ptr<void> held;
  ASSERT_EQ(slots.Take("a", nullptr, &held), FairSlots::Result::kGranted);
  auto left = std::make_unique<Waiting>(slots, "b");
  Waiting next(slots, "c");
  ASSERT_TRUE(WaitUntil([&] { return slots.waiting("b") == 1 && slots.waiting("c") == 1; }));
  left->gone = true;
  left->thread.join();
  EXPECT_EQ(left->result, FairSlots::Result::kGaveUp);
  EXPECT_EQ(slots.waiting("b"), 0);
  held.reset();
  ASSERT_TRUE(WaitUntil([&] { return next.granted.load(); }));
}

}  // namespace
}  // namespace fair_slots_test
}  // namespace kiln::control
