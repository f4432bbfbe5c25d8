#include "store/egress_log_store.h"

#include <gtest/gtest.h>

namespace kiln::store {
namespace egress_log_store_test {
namespace {

EgressEntry Entry(const std::string& sandbox, const std::string& host, const std::string& verdict) {
  EgressEntry e;
  e.sandbox_id = sandbox;
  e.start_ms = 1000;
  e.method = "CONNECT";
  e.host = host;
  e.address = "203.0.113.10";
  e.port = 443;
  e.verdict = verdict;
  return e;
}

TEST(EgressLogStoreTest, AddsClosesAndPagesPerSandbox) {
  Db db(":memory:");
  EgressLogStore log(db);
  EgressEntry open = Entry("sb1", "pkgs.test", "allowed");
  open.open = true;
  int64_t a = log.Add(open);
  int64_t b = log.Add(Entry("sb2", "other.test", "not-allowed"));
  int64_t c = log.Add(Entry("sb1", "x.test", "denied"));
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  log.Close(a, 10, 20, 30, "policy");
  auto all = log.List("sb1", 0, 10);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].seq, a);
  EXPECT_FALSE(all[0].open);
  EXPECT_EQ(all[0].bytes_out, 10);
  EXPECT_EQ(all[0].bytes_in, 20);
  EXPECT_EQ(all[0].duration_ms, 30);
  EXPECT_EQ(all[0].closed_by, "policy");
  EXPECT_EQ(all[1].host, "x.test");
  EXPECT_EQ(all[1].verdict, "denied");
  auto page = log.List("sb1", a, 1);  // after the cursor
  ASSERT_EQ(page.size(), 1u);
  EXPECT_EQ(page[0].seq, c);
  EXPECT_TRUE(log.List("sb1", c, 10).empty());
  EXPECT_EQ(log.List("sb2", 0, 10).size(), 1u);  // each sandbox's log is its own
}

TEST(EgressLogStoreTest, RetentionDropsOldClosedEntries) {
  Db db(":memory:");
  EgressLogStore log(db);
  EgressEntry old = Entry("sb1", "old.test", "allowed");
  old.start_ms = 100;
  EgressEntry still_open = old;
  still_open.host = "open.test";
  still_open.open = true;
  log.Add(old);
  log.Add(still_open);
  log.Add(Entry("sb1", "new.test", "allowed"));  // start_ms 1000
  log.DeleteBefore(500);
  auto left = log.List("sb1", 0, 10);
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].host, "open.test");  // an open connection is never dropped
  EXPECT_EQ(left[1].host, "new.test");
}

TEST(EgressLogStoreTest, OpenEntriesOfADeadDaemonAreClosed) {
  Db db(":memory:");
  EgressLogStore log(db);
  EgressEntry e = Entry("sb1", "pkgs.test", "allowed");
  e.open = true;
  log.Add(e);
  log.CloseAllOpen();
  auto all = log.List("sb1", 0, 10);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_FALSE(all[0].open);
  EXPECT_EQ(all[0].closed_by, "daemon-restart");
}

TEST(EgressLogStoreTest, KeepsAtMostTheCapPerSandbox) {
  Db db(":memory:");
  EgressLogStore log(db, /*per_sandbox_cap=*/100);
  for (int i = 0; i < 1000; ++i) log.Add(Entry("flood", "h" + std::to_string(i), "not-allowed"));
  log.Add(Entry("quiet", "q", "allowed"));
  auto kept = log.List("flood", 0, 2000);
  // Trimmed every 256 adds: never more than the cap plus one batch.
  EXPECT_LE(kept.size(), 100u + 256u);
  EXPECT_GE(kept.size(), 100u);
  EXPECT_EQ(kept.back().host, "h999");  // the newest stay
  EXPECT_EQ(log.List("quiet", 0, 10).size(), 1u);
}

}  // namespace
}  // namespace egress_log_store_test
}  // namespace kiln::store
