#include "control/metering.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kiln::control {
namespace metering_test {
namespace {

using nlohmann::json;

Shape MakeShape(int vcpu, int memory_mib) {
  Shape s;
  s.vcpu = vcpu;
  s.memory_mib = memory_mib;
  return s;
}

constexpr uint64_t kNsPerSecond = 1000000000;
constexpr int64_t kHourMs = 3600 * 1000;

// Expects FromJson to throw an invalid_argument whose message names `key`.
void ExpectBadKey(const json& j, const std::string& key) {
  try {
    PriceTable::FromJson(j);
    ADD_FAILURE() << "no error for " << j.dump();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(MeteringPriceTest, Defaults) {
  PriceTable p;
  EXPECT_EQ(p.vcpu_hour_micros, 25000);
  EXPECT_EQ(p.gib_hour_micros, 7500);
  EXPECT_EQ(p.cpu_floor_millis, 50);
  EXPECT_EQ(p.snapshot_gb_month_micros, 80000);
  PriceTable q = PriceTable::FromJson(json::object());
  EXPECT_EQ(q.ToJson(), p.ToJson());
  EXPECT_EQ(PriceTable::FromJson(json()).ToJson(), p.ToJson());
}

TEST(MeteringPriceTest, FromJsonReadsKeysAndRoundTrips) {
  PriceTable p = PriceTable::FromJson(json{{"vcpuHourMicros", 100}, {"cpuFloorMillis", 0}});
  EXPECT_EQ(p.vcpu_hour_micros, 100);
  EXPECT_EQ(p.gib_hour_micros, 7500);
  EXPECT_EQ(p.cpu_floor_millis, 0);
  p.gib_hour_micros = 1;
  p.snapshot_gb_month_micros = 2;
  p.cpu_floor_millis = 500;
  PriceTable q = PriceTable::FromJson(p.ToJson());
  EXPECT_EQ(q.vcpu_hour_micros, 100);
  EXPECT_EQ(q.gib_hour_micros, 1);
  EXPECT_EQ(q.snapshot_gb_month_micros, 2);
  EXPECT_EQ(q.cpu_floor_millis, 500);
  EXPECT_EQ(p.ToJson().at("vcpuHourMicros"), 100);
}

TEST(MeteringPriceTest, FromJsonErrorsNameTheKey) {
  ExpectBadKey(json{{"vcpuHourMicros", -1}}, "vcpuHourMicros");
  ExpectBadKey(json{{"vcpuHourMicros", "25000"}}, "vcpuHourMicros");
  ExpectBadKey(json{{"gibHourMicros", 1.5}}, "gibHourMicros");
  ExpectBadKey(json{{"gibHourMicros", true}}, "gibHourMicros");
  ExpectBadKey(json{{"snapshotGbMonthMicros", nullptr}}, "snapshotGbMonthMicros");
  ExpectBadKey(json{{"snapshotGbMonthMicros", 18446744073709551615ULL}}, "snapshotGbMonthMicros");
  ExpectBadKey(json{{"cpuFloorMillis", 1001}}, "cpuFloorMillis");
  ExpectBadKey(json{{"cpuFloorMillis", -1}}, "cpuFloorMillis");
  ExpectBadKey(json{{"cpuFloorMillis", 0.5}}, "cpuFloorMillis");
  EXPECT_THROW(PriceTable::FromJson(json::array()), std::invalid_argument);
}

TEST(MeteringTest, FullCpuHour) {
  UsageDelta d = MeterInterval(PriceTable(), MakeShape(1, 1024), 3600 * kNsPerSecond, kHourMs);
  EXPECT_DOUBLE_EQ(d.cpu_seconds, 3600);
  EXPECT_DOUBLE_EQ(d.charged_cpu_seconds, 3600);
  EXPECT_DOUBLE_EQ(d.gib_hours, 1);
  EXPECT_EQ(d.micros, 25000 + 7500);
  EXPECT_NEAR(d.micros_exact, 32500, 1e-6);
}

TEST(MeteringTest, IdleHourChargesTheFloor) {
  UsageDelta d = MeterInterval(PriceTable(), MakeShape(1, 1024), 0, kHourMs);
  EXPECT_DOUBLE_EQ(d.cpu_seconds, 0);
  EXPECT_NEAR(d.charged_cpu_seconds, 180, 1e-9);
  EXPECT_EQ(d.micros, 1250 + 7500);
  EXPECT_NEAR(d.micros_exact, 0.05 * 25000 + 7500, 1e-6);
}

TEST(MeteringTest, FloorIsPerSandboxNotPerVcpu) {
  UsageDelta d = MeterInterval(PriceTable(), MakeShape(2, 1024), 0, kHourMs);
  EXPECT_NEAR(d.charged_cpu_seconds, 180, 1e-9);
  EXPECT_EQ(d.micros, 1250 + 7500);
  // Measured CPU above the floor is charged as measured.
  d = MeterInterval(PriceTable(), MakeShape(2, 2048), 1800 * kNsPerSecond, kHourMs);
  EXPECT_NEAR(d.charged_cpu_seconds, 1800, 1e-9);
  EXPECT_EQ(d.micros, 12500 + 15000);
}

TEST(MeteringTest, ZeroAndNegativeWall) {
  UsageDelta d = MeterInterval(PriceTable(), MakeShape(2, 2048), 0, 0);
  EXPECT_EQ(d.micros_exact, 0);
  d = MeterInterval(PriceTable(), MakeShape(2, 2048), 0, -5000);
  EXPECT_EQ(d.micros_exact, 0);
  EXPECT_EQ(d.gib_hours, 0);
}

TEST(MeteringTest, SmallIntervalsSumWithoutLoss) {
  // One idle hour metered second by second: each second costs ~2.43
  // micro-dollars, which would round to 2 per interval.
  PriceTable p;
  Shape s = MakeShape(1, 1024);
  double exact = 0;
  int64_t rounded = 0;
  for (int i = 0; i < 3600; ++i) {
    UsageDelta d = MeterInterval(p, s, 0, 1000);
    exact += d.micros_exact;
    rounded += d.micros;
  }
  EXPECT_NEAR(exact, 8750, 1e-6);
  EXPECT_NE(rounded, 8750);  // why micros_exact exists
}

TEST(MeteringTest, MaxLeaseCost) {
  PriceTable p;
  EXPECT_EQ(MaxLeaseCostMicros(p, MakeShape(1, 1024), 3600), 32500);
  EXPECT_EQ(MaxLeaseCostMicros(p, MakeShape(2, 2048), 7200), 2 * (50000 + 15000));
  EXPECT_EQ(MaxLeaseCostMicros(p, MakeShape(1, 1024), 0), 0);
  EXPECT_EQ(MaxLeaseCostMicros(p, MakeShape(1, 1024), -10), 0);
  // Rounded up: one second of 1 vCPU is 6.94.. + 2.08.. micro-dollars.
  EXPECT_EQ(MaxLeaseCostMicros(p, MakeShape(1, 1024), 1), 10);
  // Never below the metered cost of the same lease at full CPU.
  UsageDelta d = MeterInterval(p, MakeShape(4, 3000), 4 * 977 * kNsPerSecond, 977 * 1000);
  EXPECT_GE(MaxLeaseCostMicros(p, MakeShape(4, 3000), 977), d.micros_exact);
  // Huge leases saturate instead of overflowing.
  p.vcpu_hour_micros = INT64_MAX;
  EXPECT_EQ(MaxLeaseCostMicros(p, MakeShape(64, 1024), INT64_MAX / 2), INT64_MAX);
}

TEST(MeteringTest, SnapshotStorage) {
  PriceTable p;
  const int64_t month_ms = 30LL * 24 * kHourMs;
  EXPECT_EQ(SnapshotStorageMicros(p, 1000000000, month_ms), 80000);
  EXPECT_DOUBLE_EQ(SnapshotGbMonths(1000000000, month_ms), 1);
  EXPECT_EQ(SnapshotStorageMicros(p, 500000000, month_ms), 40000);
  EXPECT_EQ(SnapshotStorageMicros(p, 1000000000, 0), 0);
  // 1 GB for one minute: 1.85.. micro-dollars, kept exact.
  EXPECT_NEAR(SnapshotStorageMicrosExact(p, 1000000000, 60000), 80000.0 / 43200, 1e-9);
  EXPECT_EQ(SnapshotStorageMicros(p, 1000000000, 60000), 2);
}

}  // namespace
}  // namespace metering_test
}  // namespace kiln::control
