#include "control/metrics_history.h"

#include <gtest/gtest.h>

namespace kiln::control {
namespace {

MetricSample At(int64_t at_ms, double cpu, uint64_t mem) {
  MetricSample s;
  s.at_ms = at_ms;
  s.cpu_percent = cpu;
  s.cpu_cores = 2;
  s.memory_bytes = mem;
  s.memory_limit_bytes = 1 << 30;
  s.disk_bytes = 4096;
  s.disk_limit_bytes = 1 << 30;
  return s;
}

constexpr int64_t kStart = 1'800'000'000'000;  // a whole hour

TEST(MetricsHistory, EmptyHasNothing) {
  MetricsHistory h;
  EXPECT_FALSE(h.Latest());
  EXPECT_TRUE(h.Query(0, kStart, 5000).empty());
}

TEST(MetricsHistory, FinePointsFoldIntoTheAskedSpanWithPeaks) {
  MetricsHistory h;
  // 5 s samples: cpu 10, 30 alternating; memory rising.
  for (int i = 0; i < 12; ++i) h.Add(At(kStart + i * 5000, i % 2 ? 30 : 10, 100 + i));
  EXPECT_EQ(h.Latest()->memory_bytes, 111u);
  auto raw = h.Query(kStart, kStart + 60000, 5000);
  ASSERT_EQ(raw.size(), 12u);
  EXPECT_EQ(raw[3].mean.at_ms, kStart + 15000);
  EXPECT_DOUBLE_EQ(raw[3].mean.cpu_percent, 30);
  auto tens = h.Query(kStart, kStart + 60000, 10000);
  ASSERT_EQ(tens.size(), 6u);
  EXPECT_EQ(tens[1].mean.at_ms, kStart + 10000);
  EXPECT_DOUBLE_EQ(tens[1].mean.cpu_percent, 20);
  EXPECT_DOUBLE_EQ(tens[1].cpu_peak_percent, 30);
  EXPECT_EQ(tens[1].memory_peak_bytes, 103u);
  EXPECT_EQ(tens[1].samples, 2);
  // The range bounds what comes back.
  auto some = h.Query(kStart + 20000, kStart + 30000, 5000);
  ASSERT_EQ(some.size(), 3u);
  EXPECT_EQ(some.front().mean.at_ms, kStart + 20000);
  EXPECT_TRUE(h.Query(kStart - 7200000, kStart - 3600000, 5000).empty());
}

TEST(MetricsHistory, OlderRangesComeFromCoarserPointsAndMemoryIsBounded) {
  MetricsHistory h;
  int64_t end = kStart + 3 * MetricsHistory::kHourSpanMs;
  for (int64_t t = kStart; t < end; t += 5000) h.Add(At(t, 50, 1000));
  // The last hour in 20 s points, from the fine samples.
  auto hour = h.Query(end - 3600000, end, 20000);
  EXPECT_GE(hour.size(), 179u);
  EXPECT_LE(hour.size(), 181u);
  // Two hours back: 2-minute points, not finer even if asked.
  auto two = h.Query(end - 7200000, end, 10000);
  ASSERT_FALSE(two.empty());
  EXPECT_EQ(two[1].mean.at_ms - two[0].mean.at_ms, MetricsHistory::kMinuteSpanMs);
  EXPECT_EQ(two[0].samples, 24);
  EXPECT_DOUBLE_EQ(two[0].mean.cpu_percent, 50);
  // Past a day: hours.
  for (int64_t t = end; t < end + 26 * MetricsHistory::kHourSpanMs; t += 60000)
    h.Add(At(t, 50, 1000));
  int64_t later = end + 26 * MetricsHistory::kHourSpanMs - 60000;
  auto days = h.Query(later - 28 * MetricsHistory::kHourSpanMs, later, 0);
  ASSERT_GE(days.size(), 28u);
  EXPECT_EQ(days[1].mean.at_ms - days[0].mean.at_ms, MetricsHistory::kHourSpanMs);
  EXPECT_EQ(h.Query(later - 3600000, later, 5000).size(), 61u);  // 1/min now
}

TEST(MetricsHistory, ASampleOlderThanTheLastIsDropped) {
  MetricsHistory h;
  h.Add(At(kStart + 5000, 10, 1));
  h.Add(At(kStart, 90, 2));
  EXPECT_EQ(h.Latest()->memory_bytes, 1u);
  EXPECT_EQ(h.Query(kStart, kStart + 10000, 5000).size(), 1u);
}

}  // namespace
}  // namespace kiln::control
