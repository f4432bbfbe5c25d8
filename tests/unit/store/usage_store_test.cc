#include "store/usage_store.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace kiln::store {
namespace usage_store_test {
namespace {

UsageRow Row(const std::string& sandbox, const std::string& key, int64_t end_ms, double micros,
             std::map<std::string, std::string> labels = {}, const std::string& kind = "sandbox") {
  UsageRow r;
  r.sandbox_id = sandbox;
  r.key_id = key;
  r.labels = std::move(labels);
  r.kind = kind;
  r.start_ms = end_ms - 1000;
  r.end_ms = end_ms;
  r.cpu_seconds = kind == "sandbox" ? 0.5 : 0;
  r.gib_hours = kind == "sandbox" ? 0.25 : 0;
  r.gb_months = kind == "snapshot" ? 0.125 : 0;
  r.micros = micros;
  return r;
}

TEST(UsageStoreTest, SumsPerKeyAndSandbox) {
  Db db(":memory:");
  UsageStore usage(db);
  usage.Record({Row("sb1", "k1", 1000, 1.25), Row("sb1", "k1", 2000, 2.5),
                Row("sb2", "k1", 3000, 0.125), Row("sb3", "k2", 2000, 100)});
  EXPECT_DOUBLE_EQ(usage.SpentMicrosSince("k1", 0), 3.875);
  EXPECT_DOUBLE_EQ(usage.SpentMicrosSince("k1", 1000), 2.625);  // end_ms > since
  EXPECT_DOUBLE_EQ(usage.SpentMicrosSince("k1", 3000), 0);
  EXPECT_DOUBLE_EQ(usage.SpentMicrosSince("k2", 0), 100);
  EXPECT_DOUBLE_EQ(usage.SpentMicrosSince("nobody", 0), 0);
  EXPECT_DOUBLE_EQ(usage.SandboxMicros("sb1"), 3.75);
  EXPECT_DOUBLE_EQ(usage.SandboxCpuSeconds("sb1"), 1.0);
  EXPECT_DOUBLE_EQ(usage.SandboxMicros("missing"), 0);
  usage.Record({});
}

TEST(UsageStoreTest, FractionsAccumulate) {
  Db db(":memory:");
  UsageStore usage(db);
  std::vector<UsageRow> rows;
  for (int i = 1; i <= 1000; ++i) rows.push_back(Row("sb", "k", i, 0.4));
  usage.Record(rows);
  EXPECT_NEAR(usage.SandboxMicros("sb"), 400, 1e-9);
}

TEST(UsageStoreTest, RecordIsAllOrNothing) {
  Db db(":memory:");
  UsageStore usage(db);
  EXPECT_THROW(usage.Record({Row("sb", "k", 1000, 5), Row("sb", "k", 2000, 5, {}, "bogus")}),
               DbError);
  EXPECT_DOUBLE_EQ(usage.SandboxMicros("sb"), 0);
}

TEST(UsageStoreTest, TotalsWindowAndKeyFilter) {
  Db db(":memory:");
  UsageStore usage(db);
  usage.Record({Row("sb1", "k1", 999, 1), Row("sb1", "k1", 1000, 2), Row("sb1", "k1", 1500, 4),
                Row("sb2", "k2", 1999, 8), Row("snap1", "k2", 1500, 16, {}, "snapshot"),
                Row("sb3", "k1", 2000, 32)});
  auto t = usage.Totals(1000, 2000, "", std::nullopt);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].group, "total");
  EXPECT_DOUBLE_EQ(t[0].micros, 2 + 4 + 8 + 16);
  EXPECT_DOUBLE_EQ(t[0].cpu_seconds, 1.5);
  EXPECT_DOUBLE_EQ(t[0].gib_hours, 0.75);
  EXPECT_DOUBLE_EQ(t[0].gb_months, 0.125);
  EXPECT_EQ(t[0].sandboxes, 2);  // sb1 and sb2; the snapshot is no sandbox

  t = usage.Totals(1000, 2000, "", std::string("k1"));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_DOUBLE_EQ(t[0].micros, 6);
  EXPECT_EQ(t[0].sandboxes, 1);

  t = usage.Totals(5000, 6000, "", std::nullopt);  // empty window: one zero row
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].group, "total");
  EXPECT_DOUBLE_EQ(t[0].micros, 0);
  EXPECT_EQ(t[0].sandboxes, 0);
}

TEST(UsageStoreTest, TotalsByKey) {
  Db db(":memory:");
  UsageStore usage(db);
  usage.Record({Row("sb1", "k2", 100, 1), Row("sb2", "k1", 100, 2), Row("sb2", "k1", 200, 4),
                Row("sb3", "k1", 200, 8)});
  auto t = usage.Totals(0, 1000, "key", std::nullopt);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].group, "k1");
  EXPECT_DOUBLE_EQ(t[0].micros, 14);
  EXPECT_EQ(t[0].sandboxes, 2);
  EXPECT_EQ(t[1].group, "k2");
  EXPECT_DOUBLE_EQ(t[1].micros, 1);
  EXPECT_EQ(t[1].sandboxes, 1);

  t = usage.Totals(0, 1000, "key", std::string("k2"));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].group, "k2");
  EXPECT_TRUE(usage.Totals(5000, 6000, "key", std::nullopt).empty());
}

TEST(UsageStoreTest, TotalsByLabel) {
  Db db(":memory:");
  UsageStore usage(db);
  usage.Record({Row("sb1", "k", 100, 1, {{"team", "red"}, {"env", "prod"}}),
                Row("sb2", "k", 100, 2, {{"team", "blue"}}),
                Row("sb3", "k", 100, 4, {{"team", "red"}}), Row("sb4", "k", 100, 8),
                Row("sb5", "k", 100, 16, {{"a.b \"c\"", "odd"}})});
  auto t = usage.Totals(0, 1000, "label:team", std::nullopt);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].group, "");  // rows without the label
  EXPECT_DOUBLE_EQ(t[0].micros, 24);
  EXPECT_EQ(t[0].sandboxes, 2);
  EXPECT_EQ(t[1].group, "blue");
  EXPECT_DOUBLE_EQ(t[1].micros, 2);
  EXPECT_EQ(t[2].group, "red");
  EXPECT_DOUBLE_EQ(t[2].micros, 5);
  EXPECT_EQ(t[2].sandboxes, 2);

  // Label names are matched exactly, whatever they contain.
  t = usage.Totals(0, 1000, "label:a.b \"c\"", std::nullopt);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1].group, "odd");
  EXPECT_DOUBLE_EQ(t[1].micros, 16);

  EXPECT_THROW(usage.Totals(0, 1000, "label:", std::nullopt), std::invalid_argument);
  EXPECT_THROW(usage.Totals(0, 1000, "sandbox", std::nullopt), std::invalid_argument);
}

TEST(UsageStoreTest, DeleteBeforeAndReopen) {
  Db db(":memory:");
  {
    UsageStore usage(db);
    usage.Record({Row("sb", "k", 1000, 1), Row("sb", "k", 2000, 2), Row("sb", "k", 3000, 4)});
    usage.DeleteBefore(2000);
  }
  UsageStore again(db);  // the table already exists
  EXPECT_DOUBLE_EQ(again.SandboxMicros("sb"), 6);
}

}  // namespace
}  // namespace usage_store_test
}  // namespace kiln::store
