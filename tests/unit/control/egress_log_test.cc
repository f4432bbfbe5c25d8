// The egress log's pages: oldest first, each after the cursor the last one
// ended at, with no cursor past the last entry.
#include "control/egress_log.h"

#include <gtest/gtest.h>

#include "store/db.h"

namespace kiln::control {
namespace egress_log_test {
namespace {

TEST(EgressLogTest, PagesEndWhereTheNextOneStarts) {
  store::Db db(":memory:");
  store::EgressLogStore store(db);
  std::vector<int64_t> seqs;
  for (int i = 0; i < 5; ++i) {
    store::EgressEntry e;
    e.sandbox_id = "sb1";
    e.host = "h" + std::to_string(i);
    seqs.push_back(store.Add(e));
    store::EgressEntry other;
    other.sandbox_id = "sb2";
    store.Add(other);
  }
  EgressLog log(store);
  EgressLog::Page first = log.Read("sb1", 0, 2);
  ASSERT_EQ(first.entries.size(), 2u);
  EXPECT_EQ(first.entries[0].host, "h0");
  EXPECT_EQ(first.next_cursor, seqs[1]);
  EgressLog::Page second = log.Read("sb1", *first.next_cursor, 2);
  ASSERT_EQ(second.entries.size(), 2u);
  EXPECT_EQ(second.entries[0].host, "h2");
  EXPECT_EQ(second.next_cursor, seqs[3]);
  EgressLog::Page last = log.Read("sb1", *second.next_cursor, 2);
  ASSERT_EQ(last.entries.size(), 1u);
  EXPECT_EQ(last.entries[0].host, "h4");
  EXPECT_FALSE(last.next_cursor);
  EgressLog::Page exact = log.Read("sb1", 0, 5);  // every entry: nothing follows
  EXPECT_EQ(exact.entries.size(), 5u);
  EXPECT_FALSE(exact.next_cursor);
}

}  // namespace
}  // namespace egress_log_test
}  // namespace kiln::control
