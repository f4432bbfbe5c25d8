#include "engine/memory_guard.h"

#include <gtest/gtest.h>

#include <chrono>

namespace kiln::engine {
namespace memory_guard_test {
namespace {

// The guard judges a sandbox by its own memory: the Sentry's heap (rss) and
// the application memory file (shmem), not the page cache of its disk.
TEST(MemoryGuardTest, AnonBytesLeaveFilePageCacheOut) {
  const char* stat =
      "cache 901760512\n"
      "rss 15962112\n"
      "shmem 300523520\n"
      "total_cache 901760512\n"
      "total_rss 15962112\n"
      "total_rss_huge 0\n"
      "total_shmem 300523520\n"
      "total_mapped_file 900515328\n"
      "total_inactive_file 600000000";
  EXPECT_EQ(ParseAnonBytes(stat), 15962112 + 300523520);
  EXPECT_EQ(ParseAnonBytes(""), 0);
  // Keys are matched whole: total_rss_huge is not total_rss.
  EXPECT_EQ(ParseAnonBytes("total_rss_huge 5\ntotal_shmem 7\n"), 7);
}

// Destruction stops both threads at once, the loop's epoll_wait without a
// timeout included (nothing is watched, so it would otherwise wait forever).
TEST(MemoryGuardTest, StopsPromptly) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 50; ++i) {
    MemoryGuard guard;
    EXPECT_FALSE(guard.Watch("sbx", "/nonexistent/cgroup", 1 << 20, [] {}));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace memory_guard_test
}  // namespace kiln::engine
