#include "control/metering.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace kiln::control {
using nlohmann::json;

namespace {

constexpr double kMsPerMonth = 30.0 * 24 * 3600 * 1000;  // the price's 30-day month
constexpr double kBytesPerGb = 1e9;

void ReadMicros(const json& j, const char* key, int64_t* out) {
  auto it = j.find(key);
  if (it == j.end()) return;
  // Prices are whole micro-dollars; a float here is more likely a unit
  // mistake (dollars instead of micros) than an intended fraction.
  if (!it->is_number_integer()) {
    throw std::invalid_argument(std::string(key) + " must be an integer (micro-dollars)");
  }
  if (it->is_number_unsigned() &&
      it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw std::invalid_argument(std::string(key) + " is too large");
  }
  int64_t v = it->get<int64_t>();
  if (v < 0) throw std::invalid_argument(std::string(key) + " must not be negative");
  *out = v;
}

}  // namespace

PriceTable PriceTable::FromJson(const json& j) {
  PriceTable p;
  if (j.is_null()) return p;
  if (!j.is_object()) throw std::invalid_argument("prices must be an object");
  ReadMicros(j, "vcpuHourMicros", &p.vcpu_hour_micros);
  ReadMicros(j, "gibHourMicros", &p.gib_hour_micros);
  ReadMicros(j, "snapshotGbMonthMicros", &p.snapshot_gb_month_micros);
  ReadMicros(j, "cpuFloorMillis", &p.cpu_floor_millis);
  if (p.cpu_floor_millis > 1000)
    throw std::invalid_argument("cpuFloorMillis must be within [0, 1000] (milli-vCPU)");
  return p;
}

json PriceTable::ToJson() const {
  return json{{"vcpuHourMicros", vcpu_hour_micros},
              {"gibHourMicros", gib_hour_micros},
              {"cpuFloorMillis", cpu_floor_millis},
              {"snapshotGbMonthMicros", snapshot_gb_month_micros}};
}

UsageDelta MeterInterval(const PriceTable& prices, const Shape& shape, uint64_t cpu_ns,
                         int64_t wall_ms) {
  const double wall_s = static_cast<double>(std::max<int64_t>(wall_ms, 0)) / 1000;
  const double gib = std::max(shape.memory_mib, 0) / 1024.0;
  UsageDelta d;
  d.cpu_seconds = static_cast<double>(cpu_ns) / 1e9;
  // Not capped at vcpu * wall: samples taken a little late make one interval
  // look busier and the next idler, and a cap would only drop the excess.
  // The floor is per sandbox, whatever its vCPUs (the reference's pricing).
  d.charged_cpu_seconds =
      std::max(d.cpu_seconds, static_cast<double>(prices.cpu_floor_millis) / 1000 * wall_s);
  d.gib_hours = gib * wall_s / 3600;
  d.micros_exact = d.charged_cpu_seconds / 3600 * static_cast<double>(prices.vcpu_hour_micros) +
                   d.gib_hours * static_cast<double>(prices.gib_hour_micros);
  d.micros = std::llround(d.micros_exact);
  return d;
}

int64_t MaxLeaseCostMicros(const PriceTable& prices, const Shape& shape, int64_t seconds) {
  if (seconds <= 0) return 0;
  // Exact integer arithmetic over the common denominator (1024 MiB/GiB x
  // 3600 s/h) in 128 bits; absurd inputs saturate instead of overflowing.
  using Wide = __int128;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const Wide den = Wide{1024} * 3600;
  Wide cpu, mem, num;
  if (__builtin_mul_overflow(Wide{std::max(shape.vcpu, 0)} * 1024 * prices.vcpu_hour_micros,
                             Wide{seconds}, &cpu) ||
      __builtin_mul_overflow(Wide{std::max(shape.memory_mib, 0)} * prices.gib_hour_micros,
                             Wide{seconds}, &mem) ||
      __builtin_add_overflow(cpu, mem, &num)) {
    return kMax;
  }
  const Wide cost = num / den + (num % den != 0);
  return cost > kMax ? kMax : static_cast<int64_t>(cost);
}

double SnapshotGbMonths(uint64_t size_bytes, int64_t wall_ms) {
  return static_cast<double>(size_bytes) / kBytesPerGb *
         (static_cast<double>(std::max<int64_t>(wall_ms, 0)) / kMsPerMonth);
}

double SnapshotStorageMicrosExact(const PriceTable& prices, uint64_t size_bytes, int64_t wall_ms) {
  return SnapshotGbMonths(size_bytes, wall_ms) *
         static_cast<double>(prices.snapshot_gb_month_micros);
}

int64_t SnapshotStorageMicros(const PriceTable& prices, uint64_t size_bytes, int64_t wall_ms) {
  return std::llround(SnapshotStorageMicrosExact(prices, size_bytes, wall_ms));
}

}  // namespace kiln::control
