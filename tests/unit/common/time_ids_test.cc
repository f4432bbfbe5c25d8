// Time formatting and identifiers (src/common/time.h, src/common/ids.h).
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "common/ids.h"
#include "common/time.h"

namespace kiln {
namespace time_ids_test {
namespace {

TEST(TimeTest, FormatTimeKnownValues) {
  EXPECT_EQ(FormatTime(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatTime(1), "1970-01-01T00:00:00.001Z");
  EXPECT_EQ(FormatTime(999), "1970-01-01T00:00:00.999Z");
  EXPECT_EQ(FormatTime(1000), "1970-01-01T00:00:01.000Z");
  EXPECT_EQ(FormatTime(1700000000123), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(FormatTime(951782400000), "2000-02-29T00:00:00.000Z");  // leap day
  EXPECT_EQ(FormatTime(1798761599999), "2026-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatTime(4102444800000), "2100-01-01T00:00:00.000Z");  // past 2038
}

TEST(TimeTest, FormatTimeIsFixedWidthIso8601Utc) {
  const std::regex kIso(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)");
  for (int64_t t : {int64_t{0}, int64_t{5}, int64_t{86399999}, NowMs()}) {
    std::string s = FormatTime(t);
    EXPECT_TRUE(std::regex_match(s, kIso)) << s;
    EXPECT_EQ(s.size(), 24u) << s;
  }
}

TEST(TimeTest, NowIsPlausibleAndMonotonicDoesNotGoBack) {
  int64_t now = NowMs();
  EXPECT_GT(now, int64_t{1700000000000});  // after Nov 2023
  EXPECT_LT(now, int64_t{4102444800000});  // before 2100
  int64_t a = MonotonicNowMs();
  int64_t b = MonotonicNowMs();
  EXPECT_LE(a, b);
}

TEST(IdsTest, NewUuidFormatVersionAndVariant) {
  const std::regex kUuid("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  for (int i = 0; i < 200; ++i) {
    std::string u = NewUuid();
    ASSERT_EQ(u.size(), 36u) << u;
    ASSERT_TRUE(std::regex_match(u, kUuid)) << u;
  }
}

TEST(IdsTest, NewUuidIsUniqueOver1000) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(NewUuid());
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(IdsTest, NewUuidUsesAllRandomBits) {
  // Over many UUIDs every non-fixed hex position takes more than one value
  // (catches a field that is always zero, e.g. a bad shift).
  std::vector<std::set<char>> values(36);
  for (int i = 0; i < 500; ++i) {
    std::string u = NewUuid();
    for (size_t k = 0; k < u.size(); ++k) values[k].insert(u[k]);
  }
  for (size_t k = 0; k < 36; ++k) {
    if (k == 8 || k == 13 || k == 18 || k == 23) {
      EXPECT_EQ(values[k], std::set<char>{'-'});
    } else if (k == 14) {
      EXPECT_EQ(values[k], std::set<char>{'4'});
    } else if (k == 19) {
      EXPECT_EQ(values[k], (std::set<char>{'8', '9', 'a', 'b'}));
    } else {
      EXPECT_GT(values[k].size(), 8u) << "position " << k;
    }
  }
}

TEST(IdsTest, RandomU64Differs) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(RandomU64());
  EXPECT_EQ(seen.size(), 1000u);
}

}  // namespace
}  // namespace time_ids_test
}  // namespace kiln

TEST(FormatTimeRegression, BeforeTheEpochUsesFloorDivision) {
  EXPECT_EQ(kiln::FormatTime(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(kiln::FormatTime(-1500), "1969-12-31T23:59:58.500Z");
}
