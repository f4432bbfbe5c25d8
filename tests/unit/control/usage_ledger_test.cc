// The usage ledger over a real UsageStore (SQLite in memory): rows merge per
// sandbox while pending, are written when due, one at a time or all, and
// spending counts the pending ones too.
#include "control/usage_ledger.h"

#include <gtest/gtest.h>

#include "store/db.h"

namespace kiln::control {
namespace usage_ledger_test {
namespace {

store::UsageRow Row(const std::string& id, const std::string& key, int64_t start_ms, int64_t end_ms,
                    double micros) {
  store::UsageRow r;
  r.sandbox_id = id;
  r.key_id = key;
  r.start_ms = start_ms;
  r.end_ms = end_ms;
  r.cpu_seconds = 1;
  r.gib_hours = 0.5;
  r.micros = micros;
  return r;
}

class UsageLedgerTest : public ::testing::Test {
 protected:
  // What the store holds for a key (written rows only).
  double Written(const std::string& key) { return store_.SpentMicrosSince(key, 0); }

  store::Db db_{":memory:"};
  store::UsageStore store_{db_};
  UsageLedger ledger_{store_};
};

TEST_F(UsageLedgerTest, IntervalsOfOneSandboxMergeIntoOneRow) {
  ledger_.Accumulate(Row("sb1", "key_a", 0, 5000, 1.5));
  ledger_.Accumulate(Row("sb1", "key_a", 5000, 10000, 2.25));
  ledger_.Accumulate(Row("sb2", "key_a", 0, 5000, 4));
  EXPECT_EQ(Written("key_a"), 0);  // nothing is due yet
  ledger_.FlushAll();
  EXPECT_DOUBLE_EQ(Written("key_a"), 7.75);
  EXPECT_DOUBLE_EQ(store_.SandboxMicros("sb1"), 3.75);
  EXPECT_DOUBLE_EQ(store_.SandboxCpuSeconds("sb1"), 2);  // summed, one row
  auto totals = ledger_.Totals(0, 20000, "", std::nullopt);
  ASSERT_EQ(totals.size(), 1u);
  EXPECT_EQ(totals[0].sandboxes, 2);
  EXPECT_DOUBLE_EQ(totals[0].gib_hours, 1.5);
  // The merged row spans the first interval's start to the last one's end.
  EXPECT_EQ(ledger_.Totals(9999, 10001, "", std::nullopt)[0].sandboxes, 1);
}

TEST_F(UsageLedgerTest, ARowIsWrittenOnceItSpansItsLength) {
  ledger_.Accumulate(Row("old", "key_a", 0, 1000, 1));
  ledger_.Accumulate(Row("new", "key_a", 1000, 2000, 2));
  ledger_.FlushDue(UsageLedger::kRowMs - 1);
  EXPECT_EQ(Written("key_a"), 0);
  ledger_.FlushDue(UsageLedger::kRowMs);  // "old" began kRowMs ago
  EXPECT_DOUBLE_EQ(Written("key_a"), 1);
  ledger_.FlushDue(UsageLedger::kRowMs + 1000);
  EXPECT_DOUBLE_EQ(Written("key_a"), 3);
}

TEST_F(UsageLedgerTest, OneSandboxsRowIsWrittenAlone) {
  ledger_.Accumulate(Row("stopped", "key_a", 0, 1000, 1));
  ledger_.Accumulate(Row("running", "key_a", 0, 1000, 2));
  ledger_.FlushOne("stopped");
  EXPECT_DOUBLE_EQ(store_.SandboxMicros("stopped"), 1);
  EXPECT_DOUBLE_EQ(store_.SandboxMicros("running"), 0);
  ledger_.FlushOne("stopped");  // nothing left of it: no second row
  EXPECT_DOUBLE_EQ(store_.SandboxMicros("stopped"), 1);
}

TEST_F(UsageLedgerTest, SpendingCountsPendingAndWrittenRows) {
  ledger_.Accumulate(Row("sb1", "key_a", 0, 1000, 1));
  ledger_.FlushAll();
  ledger_.Accumulate(Row("sb1", "key_a", 1000, 3000, 2));
  ledger_.Accumulate(Row("sb2", "key_b", 0, 3000, 50));
  EXPECT_DOUBLE_EQ(ledger_.SpentMicrosSince("key_a", 0), 3);
  EXPECT_DOUBLE_EQ(ledger_.SpentMicrosSince("key_a", 1000), 2);  // end_ms > since
  EXPECT_DOUBLE_EQ(ledger_.SpentMicrosSince("key_a", 3000), 0);
  EXPECT_DOUBLE_EQ(ledger_.SpentMicrosSince("key_b", 0), 50);
  EXPECT_DOUBLE_EQ(ledger_.SpentMicrosSince("nobody", 0), 0);
  // Totals read the written ledger only.
  EXPECT_DOUBLE_EQ(ledger_.Totals(0, 10000, "", std::string("key_a"))[0].micros, 1);
  ledger_.FlushAll();
  EXPECT_DOUBLE_EQ(ledger_.Totals(0, 10000, "", std::string("key_a"))[0].micros, 3);
  EXPECT_DOUBLE_EQ(ledger_.SpentMicrosSince("key_a", 0), 3);  // not counted twice
}

}  // namespace
}  // namespace usage_ledger_test
}  // namespace kiln::control
