// Metering: what a running sandbox or a stored snapshot costs. Pure
// arithmetic over a price table; the control plane samples engine usage,
// prices each interval here and writes the result to the usage ledger.
//
// Rounding: every cost is computed in double micro-dollars. A one-second
// interval of an idle sandbox costs a few micro-dollars, so rounding each
// interval to whole micro-dollars would bias the total by up to half a
// micro-dollar per interval. UsageDelta therefore carries `micros_exact`,
// which callers must accumulate (the ledger stores it as REAL); `micros` is
// that value rounded to nearest, for display of a single interval only.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "common/shape.h"

namespace kiln::control {

struct PriceTable {                          // micro-dollars
  int64_t vcpu_hour_micros = 25000;          // $0.025 per vCPU-hour of measured CPU
  int64_t gib_hour_micros = 7500;            // $0.0075 per GiB-hour of reserved memory
  int64_t cpu_floor_millis = 50;             // CPU charged is at least 1/20 vCPU per sandbox
  int64_t snapshot_gb_month_micros = 80000;  // $0.08 per GB (1e9 bytes) per 30-day month

  // camelCase keys (vcpuHourMicros, gibHourMicros, cpuFloorMillis,
  // snapshotGbMonthMicros); a missing key keeps its default, unknown keys
  // are ignored. Throws std::invalid_argument naming the key on a bad value:
  // negative, wrong type (prices must be JSON integers), or a floor over
  // 1000 milli-vCPU.
  static PriceTable FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
};

struct UsageDelta {
  double cpu_seconds = 0;          // measured
  double charged_cpu_seconds = 0;  // max(measured, floor)
  double gib_hours = 0;
  int64_t micros = 0;       // micros_exact rounded; do not sum these
  double micros_exact = 0;  // the cost; sum these
};

// Cost of one metering interval of a running sandbox: `cpu_ns` measured CPU
// over `wall_ms` of wall time. Negative wall time counts as zero.
UsageDelta MeterInterval(const PriceTable& prices, const Shape& shape, uint64_t cpu_ns,
                         int64_t wall_ms);

// Worst case of a whole lease at full CPU (every vCPU busy for `seconds`)
// plus memory, for maxCostMicros checks. Rounded up, so a lease that passes
// the check can never cost more than the limit.
int64_t MaxLeaseCostMicros(const PriceTable& prices, const Shape& shape, int64_t seconds);

// Snapshot storage over an interval, in GB-months (1e9 bytes, 30 days).
double SnapshotGbMonths(uint64_t size_bytes, int64_t wall_ms);
// Its cost; the exact form is the one to accumulate (see above).
double SnapshotStorageMicrosExact(const PriceTable& prices, uint64_t size_bytes, int64_t wall_ms);
int64_t SnapshotStorageMicros(const PriceTable& prices, uint64_t size_bytes, int64_t wall_ms);

}  // namespace kiln::control
