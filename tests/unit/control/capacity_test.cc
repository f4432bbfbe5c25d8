#include "control/capacity.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

namespace kiln::control {
namespace capacity_test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

Shape Mib(int mib) {
  Shape s;
  s.vcpu = 1;
  s.memory_mib = mib;
  return s;
}

// Polls until `pred` holds; false after 2 s.
bool WaitUntil(const std::function<bool()>& pred) {
  auto deadline = Clock::now() + std::chrono::seconds(2);
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

CapacityLimits Host(int64_t mib, int key_limit = 100) {
  CapacityLimits l;
  l.host_memory_mib = mib;
  l.host_vcpus = 64;
  l.key_sandboxes = key_limit;
  return l;
}

TEST(CapacityTest, GrantsWhileThereIsRoomThenTimesOut) {
  Capacity c(Host(1024));
  auto now = Clock::now();
  EXPECT_EQ(c.Acquire("k", Mib(512), now), Capacity::Result::kGranted);
  EXPECT_EQ(c.Acquire("k", Mib(512), now), Capacity::Result::kGranted);
  EXPECT_EQ(c.Acquire("k", Mib(512), Clock::now() + milliseconds(20)),
            Capacity::Result::kNoCapacity);
  EXPECT_EQ(c.stats().running, 2);
  EXPECT_EQ(c.stats().reserved_memory_mib, 1024);
  EXPECT_EQ(c.stats().waiting, 0);
  EXPECT_EQ(c.Acquire("k", Mib(2048), Clock::now() + milliseconds(1000)),
            Capacity::Result::kNeverFits);
}

TEST(CapacityTest, OvercommitScalesTheBudget) {
  CapacityLimits l = Host(1024);
  l.memory_overcommit = 2.0;
  Capacity c(l);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(c.Acquire("k", Mib(512), Clock::now()), Capacity::Result::kGranted);
  EXPECT_EQ(c.Acquire("k", Mib(512), Clock::now()), Capacity::Result::kNoCapacity);
}

TEST(CapacityTest, KeyLimitIsQuotaExceededAndDoesNotBlockOtherKeys) {
  Capacity c(Host(4096, 1));
  EXPECT_EQ(c.Acquire("a", Mib(256), Clock::now()), Capacity::Result::kGranted);
  std::atomic<int> a_result{-1};
  std::thread waiter([&] {
    a_result = static_cast<int>(c.Acquire("a", Mib(256), Clock::now() + milliseconds(200)));
  });
  std::this_thread::sleep_for(milliseconds(50));
  // b is behind a's waiter in line but a is only held by its own limit.
  EXPECT_EQ(c.Acquire("b", Mib(256), Clock::now()), Capacity::Result::kGranted);
  waiter.join();
  EXPECT_EQ(a_result.load(), static_cast<int>(Capacity::Result::kQuotaExceeded));
}

TEST(CapacityTest, WaitersStartInOrderAsRoomFrees) {
  Capacity c(Host(512));
  ASSERT_EQ(c.Acquire("k", Mib(512), Clock::now()), Capacity::Result::kGranted);
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) {
    threads.emplace_back([&, i] {
      auto r = c.Acquire("k", Mib(512), Clock::now() + std::chrono::seconds(10));
      ASSERT_EQ(r, Capacity::Result::kGranted);
      {
        std::lock_guard lock(mu);
        order.push_back(i);
      }
      c.Release("k", Mib(512));
    });
    // Queue them in a known order.
    while (c.stats().waiting != i + 1) std::this_thread::yield();
  }
  c.Release("k", Mib(512));
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(c.stats().running, 0);
}

TEST(CapacityTest, BigHeadIsNotOvertakenBySmallerOnes) {
  Capacity c(Host(1024));
  ASSERT_EQ(c.Acquire("k", Mib(512), Clock::now()), Capacity::Result::kGranted);
  std::atomic<bool> big_granted{false};
  std::thread big([&] {
    EXPECT_EQ(c.Acquire("k", Mib(1024), Clock::now() + std::chrono::seconds(10)),
              Capacity::Result::kGranted);
    big_granted = true;
  });
  while (c.stats().waiting != 1) std::this_thread::yield();
  // 256 would fit now, but the 1024 waiting ahead of it goes first.
  EXPECT_EQ(c.Acquire("k", Mib(256), Clock::now() + milliseconds(50)),
            Capacity::Result::kNoCapacity);
  c.Release("k", Mib(512));
  big.join();
  EXPECT_TRUE(big_granted);
}

TEST(CapacityTest, AdoptCountsWithoutWaiting) {
  Capacity c(Host(512));
  c.Adopt("k", Mib(512));
  c.Adopt("k", Mib(512));  // may exceed: it already runs
  EXPECT_EQ(c.stats().reserved_memory_mib, 1024);
  EXPECT_EQ(c.Acquire("k", Mib(128), Clock::now()), Capacity::Result::kNoCapacity);
}

TEST(CapacityTest, AWaiterThatHungUpLeavesTheLineAndIsNeverGranted) {
  Capacity c(Host(512));
  ASSERT_EQ(c.Acquire("k", Mib(512), Clock::now()), Capacity::Result::kGranted);
  std::atomic<bool> hung_up{false};
  std::function<bool()> cancelled = [&] { return hung_up.load(); };
  auto start = Clock::now();
  std::thread head([&] {
    EXPECT_EQ(c.Acquire("k", Mib(512), Clock::now() + std::chrono::seconds(30), cancelled),
              Capacity::Result::kNoCapacity);
  });
  std::atomic<bool> second_granted{false};
  std::thread second([&] {
    while (c.stats().waiting != 1) std::this_thread::yield();
    EXPECT_EQ(c.Acquire("k", Mib(512), Clock::now() + std::chrono::seconds(30)),
              Capacity::Result::kGranted);
    second_granted = true;
  });
  while (c.stats().waiting != 2) std::this_thread::yield();
  hung_up = true;
  head.join();  // noticed by the watcher within about half a second
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(c.stats().waiting, 1);
  c.Release("k", Mib(512));
  second.join();
  EXPECT_TRUE(second_granted);
  EXPECT_EQ(c.stats().running, 1);
}

TEST(CapacityTest, ManyWaitersTimeOutWithoutAnyGrant) {
  Capacity c(Host(512));
  ASSERT_EQ(c.Acquire("k", Mib(512), Clock::now()), Capacity::Result::kGranted);
  std::function<bool()> never = [] { return false; };
  std::vector<std::thread> threads;
  std::atomic<int> refused{0};
  auto deadline = Clock::now() + milliseconds(300);
  for (int i = 0; i < 200; ++i)
    threads.emplace_back([&] {
      if (c.Acquire("k", Mib(256), deadline, never) == Capacity::Result::kNoCapacity) ++refused;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(refused, 200);
  EXPECT_EQ(c.stats().waiting, 0);
  EXPECT_EQ(c.stats().running, 1);
}

TEST(CapacityTest, CloseRefusesWaitersAndLaterAcquires) {
  Capacity c(Host(512));
  ASSERT_EQ(c.Acquire("k", Mib(512), Clock::now()), Capacity::Result::kGranted);
  std::thread waiter([&] {
    EXPECT_EQ(c.Acquire("k", Mib(512), Clock::now() + std::chrono::seconds(30)),
              Capacity::Result::kNoCapacity);
  });
  while (c.stats().waiting != 1) std::this_thread::yield();
  auto start = Clock::now();
  c.Close();
  waiter.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  c.Release("k", Mib(512));
  EXPECT_EQ(c.Acquire("k", Mib(128), Clock::now() + std::chrono::seconds(30)),
            Capacity::Result::kNoCapacity);
  EXPECT_EQ(c.stats().running, 0);
}

TEST(CapacityTest, CloseWakesEveryWaiter) {
  Capacity c(Host(512));
  ASSERT_EQ(c.Acquire("k", Mib(512), Clock::now()), Capacity::Result::kGranted);
  std::atomic<int> refused{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i)
    waiters.emplace_back([&, i] {
      if (c.Acquire(i == 0 ? "k" : "other", Mib(256), Clock::now() + std::chrono::seconds(30)) ==
          Capacity::Result::kNoCapacity)
        ++refused;
    });
  ASSERT_TRUE(WaitUntil([&] { return c.stats().waiting == 3; }));
  auto start = Clock::now();
  c.Close();
  for (auto& t : waiters) t.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(refused, 3);
  EXPECT_EQ(c.stats().waiting, 0);
  EXPECT_EQ(c.stats().running, 1);
}

TEST(CapacityTest, AHeadThatHungUpIsPassedOverWhenRoomFrees) {
  // Room freed right after the hang-up, before the watcher's next look:
  // the grant itself must notice, or room goes to nobody.
  Capacity c(Host(512));
  ASSERT_EQ(c.Acquire("k", Mib(512), Clock::now()), Capacity::Result::kGranted);
  std::atomic<bool> hung_up{false};
  std::function<bool()> cancelled = [&] { return hung_up.load(); };
  std::atomic<int> head_result{-1}, second_result{-1};
  std::thread head([&] {
    head_result = static_cast<int>(
        c.Acquire("k", Mib(512), Clock::now() + std::chrono::seconds(30), cancelled));
  });
  ASSERT_TRUE(WaitUntil([&] { return c.stats().waiting == 1; }));
  std::thread second([&] {
    second_result =
        static_cast<int>(c.Acquire("k", Mib(512), Clock::now() + std::chrono::seconds(30)));
  });
  ASSERT_TRUE(WaitUntil([&] { return c.stats().waiting == 2; }));
  hung_up = true;
  c.Release("k", Mib(512));
  head.join();
  second.join();
  EXPECT_EQ(head_result, static_cast<int>(Capacity::Result::kNoCapacity));
  EXPECT_EQ(second_result, static_cast<int>(Capacity::Result::kGranted));
  EXPECT_EQ(c.stats().running, 1);
  EXPECT_EQ(c.stats().reserved_memory_mib, 512);
}

TEST(CapacityTest, AHeadThatTimesOutLetsTheSmallerOnesBehindIt) {
  Capacity c(Host(1024));
  ASSERT_EQ(c.Acquire("k", Mib(512), Clock::now()), Capacity::Result::kGranted);
  std::atomic<int> big_result{-1};
  std::thread big([&] {
    big_result = static_cast<int>(c.Acquire("k", Mib(1024), Clock::now() + milliseconds(100)));
  });
  ASSERT_TRUE(WaitUntil([&] { return c.stats().waiting == 1; }));
  auto start = Clock::now();
  // Fits now, but waits behind the big head until that one gives up.
  EXPECT_EQ(c.Acquire("k", Mib(256), Clock::now() + std::chrono::seconds(5)),
            Capacity::Result::kGranted);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  big.join();
  EXPECT_EQ(big_result, static_cast<int>(Capacity::Result::kNoCapacity));
  EXPECT_EQ(c.stats().reserved_memory_mib, 768);
}

TEST(CapacityTest, AWaiterHeldByItsKeyLimitStartsWhenItsKeyFrees) {
  Capacity c(Host(4096, 1));
  ASSERT_EQ(c.Acquire("a", Mib(256), Clock::now()), Capacity::Result::kGranted);
  std::atomic<int> result{-1};
  std::thread waiter([&] {
    result = static_cast<int>(c.Acquire("a", Mib(256), Clock::now() + std::chrono::seconds(5)));
  });
  ASSERT_TRUE(WaitUntil([&] { return c.stats().waiting == 1; }));
  auto start = Clock::now();
  c.Release("a", Mib(256));
  waiter.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(result, static_cast<int>(Capacity::Result::kGranted));
  EXPECT_EQ(c.stats().running, 1);
  // Its key is at its limit again.
  EXPECT_EQ(c.Acquire("a", Mib(256), Clock::now() + milliseconds(20)),
            Capacity::Result::kQuotaExceeded);
}

}  // namespace
}  // namespace capacity_test
}  // namespace kiln::control

namespace kiln::control {
namespace capacity_test {
namespace {

TEST(CapacityTest, DiskCountsAgainstTheStateDisksBudget) {
  CapacityLimits l = Host(1 << 20);
  l.host_disk_mib = 4096;
  l.disk_overcommit = 2.0;  // 8 GiB of diskMiB in all
  Capacity c(l);
  Shape s = Mib(128);
  s.disk_mib = 4096;
  EXPECT_EQ(c.Acquire("k", s, Clock::now()), Capacity::Result::kGranted);
  EXPECT_EQ(c.Acquire("k", s, Clock::now()), Capacity::Result::kGranted);
  EXPECT_EQ(c.Acquire("k", s, Clock::now() + milliseconds(20)), Capacity::Result::kNoCapacity);
  EXPECT_EQ(c.stats().reserved_disk_mib, 8192);
  s.disk_mib = 9000;
  EXPECT_FALSE(c.EverFits(s));
}

TEST(CapacityTest, PoolCopiesTakeOnlyRoomNobodyWaitsFor) {
  Capacity c(Host(1024));
  // Room: a pool copy takes it, from the host's budget only.
  EXPECT_TRUE(c.TakeForPool(Mib(512)));
  EXPECT_EQ(c.stats().pooled, 1);
  EXPECT_EQ(c.stats().running, 0);
  EXPECT_EQ(c.stats().reserved_memory_mib, 512);
  EXPECT_TRUE(c.TakeForPool(Mib(512)));
  EXPECT_FALSE(c.TakeForPool(Mib(512)));  // the host is full
  // A create waits for room the pool holds; the pool gives one copy back
  // (WarmPool::Reclaim) and the create gets it.
  std::atomic<int> got{-1};
  std::thread create([&] {
    got = static_cast<int>(c.Acquire("k", Mib(512), Clock::now() + std::chrono::seconds(5)));
  });
  ASSERT_TRUE(WaitUntil([&] { return c.stats().waiting == 1; }));
  EXPECT_FALSE(c.TakeForPool(Mib(1)));  // nothing for the pool while a create waits
  c.ReleasePool(Mib(512));
  create.join();
  EXPECT_EQ(got, static_cast<int>(Capacity::Result::kGranted));
  EXPECT_EQ(c.stats().pooled, 1);
  EXPECT_EQ(c.stats().running, 1);
}

TEST(CapacityTest, AHandedOutCopyPassesItsRoomToTheKey) {
  CapacityLimits limits = Host(1024);
  limits.key_sandboxes = 1;
  Capacity c(limits);
  ASSERT_TRUE(c.TakeForPool(Mib(512)));
  ASSERT_EQ(c.Acquire("other", Mib(512), Clock::now()), Capacity::Result::kGranted);
  // The host is full, yet the copy is the key's without a wait or a second count.
  EXPECT_TRUE(c.KeyHasRoom("k"));
  c.HandOut("k", Mib(512));
  EXPECT_EQ(c.stats().pooled, 0);
  EXPECT_EQ(c.stats().running, 2);
  EXPECT_EQ(c.stats().reserved_memory_mib, 1024);
  EXPECT_FALSE(c.KeyHasRoom("k"));  // it counts against the key's limit
  c.Release("k", Mib(512));
  EXPECT_EQ(c.stats().reserved_memory_mib, 512);
  EXPECT_TRUE(c.KeyHasRoom("k"));
}

}  // namespace
}  // namespace capacity_test
}  // namespace kiln::control

namespace kiln::control {
namespace capacity_test {
namespace {

TEST(CapacityTest, AKeysWaitingCreatesAreCappedAndOtherKeysStillWait) {
  CapacityLimits l = Host(512);
  l.key_waiting = 2;
  Capacity c(l);
  ASSERT_EQ(c.Acquire("a", Mib(512), Clock::now()), Capacity::Result::kGranted);
  std::vector<std::thread> waiting;
  for (const char* key : {"a", "a", "b"})
    waiting.emplace_back([&c, key] { c.Acquire(key, Mib(512), Clock::now() + milliseconds(800)); });
  ASSERT_TRUE(WaitUntil([&] { return c.stats().waiting == 3; }));
  // A third of a's is refused at once; b's line is its own.
  auto t0 = Clock::now();
  EXPECT_EQ(c.Acquire("a", Mib(512), Clock::now() + std::chrono::seconds(5)),
            Capacity::Result::kLineFull);
  EXPECT_LT(Clock::now() - t0, milliseconds(500));
  for (auto& t : waiting) t.join();
  // Once they gave up, a may wait again.
  EXPECT_EQ(c.Acquire("a", Mib(512), Clock::now() + milliseconds(20)),
            Capacity::Result::kNoCapacity);
}

}  // namespace
}  // namespace capacity_test
}  // namespace kiln::control
