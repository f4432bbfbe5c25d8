// A sandbox's resource use over time: what the meter reads every interval
// (5 s), kept in three resolutions so that a day-long lease holds a few
// thousand points, not tens of thousands.
//
//   fine     every sample, the last hour
//   minutes  2-minute points, the last 24 hours
//   hours    1-hour points, the last 30 days
//
// Thread-compatible: the owner (Sandbox) locks.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace kiln::control {

// One reading of the meter.
struct MetricSample {
  int64_t at_ms = 0;
  double cpu_percent = 0;  // of all its vCPUs: 100 = every one busy
  int cpu_cores = 0;
  uint64_t memory_bytes = 0;
  uint64_t memory_cache_bytes = 0;  // of memory_bytes, the page cache
  uint64_t memory_limit_bytes = 0;
  uint64_t disk_bytes = 0;  // its root's upper layer on the host
  uint64_t disk_limit_bytes = 0;
};

// Samples folded over a span: averages, with the peaks seen in it. `at_ms`
// is the span's start.
struct MetricPoint {
  MetricSample mean;
  double cpu_peak_percent = 0;
  uint64_t memory_peak_bytes = 0;
  int samples = 0;
};

class MetricsHistory {
 public:
  static constexpr int64_t kMinuteSpanMs = 2 * 60 * 1000;
  static constexpr int64_t kHourSpanMs = 60 * 60 * 1000;
  static constexpr int64_t kFineKeptMs = 60 * 60 * 1000;
  static constexpr int64_t kMinutesKeptMs = 24 * kHourSpanMs;
  static constexpr int64_t kHoursKeptMs = 30 * 24 * kHourSpanMs;

  // Samples come in time order; one older than the last is dropped.
  void Add(const MetricSample& sample);

  std::optional<MetricSample> Latest() const;

  // Points of `span_ms` (at least the finest resolution that still holds
  // `from_ms`) starting at multiples of span_ms, over [from_ms, to_ms],
  // oldest first.
  std::vector<MetricPoint> Query(int64_t from_ms, int64_t to_ms, int64_t span_ms) const;

 private:
  // A point being folded: the span starting at `start`.
  struct Open {
    int64_t start = -1;
    MetricPoint point;
  };
  static void Fold(MetricPoint& into, const MetricPoint& add);
  static MetricPoint FromSample(const MetricSample& s);
  static void Roll(Open& open, std::deque<MetricPoint>& done, int64_t span_ms, int64_t keep_ms,
                   const MetricPoint& add, int64_t now_ms);

  std::deque<MetricPoint> fine_;
  std::deque<MetricPoint> minutes_;
  std::deque<MetricPoint> hours_;
  Open open_minute_;
  Open open_hour_;
};

}  // namespace kiln::control
