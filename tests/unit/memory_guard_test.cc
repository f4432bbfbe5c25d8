#include "engine/memory_guard.h"

#include <gtest/gtest.h>

namespace kiln::engine {
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

}  // namespace
}  // namespace kiln::engine
