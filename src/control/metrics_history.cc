#include "control/metrics_history.h"

#include <algorithm>

namespace kiln::control {

namespace {

int64_t SpanStart(int64_t at_ms, int64_t span_ms) { return at_ms - at_ms % span_ms; }

}  // namespace

MetricPoint MetricsHistory::FromSample(const MetricSample& s) {
  MetricPoint p;
  p.mean = s;
  p.cpu_peak_percent = s.cpu_percent;
  p.memory_peak_bytes = s.memory_bytes;
  p.samples = 1;
  return p;
}

void MetricsHistory::Fold(MetricPoint& into, const MetricPoint& add) {
  if (add.samples == 0) return;
  if (into.samples == 0) {
    int64_t at = into.mean.at_ms;
    into = add;
    into.mean.at_ms = at;
    return;
  }
  double a = into.samples, b = add.samples, n = a + b;
  auto mean = [&](double x, double y) { return (x * a + y * b) / n; };
  auto mean_u = [&](uint64_t x, uint64_t y) {
    return static_cast<uint64_t>(mean(static_cast<double>(x), static_cast<double>(y)));
  };
  MetricSample& m = into.mean;
  m.cpu_percent = mean(m.cpu_percent, add.mean.cpu_percent);
  m.memory_bytes = mean_u(m.memory_bytes, add.mean.memory_bytes);
  m.memory_cache_bytes = mean_u(m.memory_cache_bytes, add.mean.memory_cache_bytes);
  m.disk_bytes = mean_u(m.disk_bytes, add.mean.disk_bytes);
  // Limits and cores: the latest (a resize changes them).
  m.cpu_cores = add.mean.cpu_cores;
  m.memory_limit_bytes = add.mean.memory_limit_bytes;
  m.disk_limit_bytes = add.mean.disk_limit_bytes;
  into.cpu_peak_percent = std::max(into.cpu_peak_percent, add.cpu_peak_percent);
  into.memory_peak_bytes = std::max(into.memory_peak_bytes, add.memory_peak_bytes);
  into.samples += add.samples;
}

void MetricsHistory::Roll(Open& open, std::deque<MetricPoint>& done, int64_t span_ms,
                          int64_t keep_ms, const MetricPoint& add, int64_t now_ms) {
  int64_t start = SpanStart(add.mean.at_ms, span_ms);
  if (open.start != start) {
    if (open.start >= 0) done.push_back(open.point);
    open.start = start;
    open.point = MetricPoint{};
    open.point.mean.at_ms = start;
  }
  Fold(open.point, add);
  while (!done.empty() && done.front().mean.at_ms < now_ms - keep_ms) done.pop_front();
}

void MetricsHistory::Add(const MetricSample& sample) {
  if (!fine_.empty() && sample.at_ms < fine_.back().mean.at_ms) return;
  MetricPoint p = FromSample(sample);
  fine_.push_back(p);
  while (fine_.front().mean.at_ms < sample.at_ms - kFineKeptMs) fine_.pop_front();
  Roll(open_minute_, minutes_, kMinuteSpanMs, kMinutesKeptMs, p, sample.at_ms);
  Roll(open_hour_, hours_, kHourSpanMs, kHoursKeptMs, p, sample.at_ms);
}

std::optional<MetricSample> MetricsHistory::Latest() const {
  if (fine_.empty()) return std::nullopt;
  return fine_.back().mean;
}

std::vector<MetricPoint> MetricsHistory::Query(int64_t from_ms, int64_t to_ms,
                                               int64_t span_ms) const {
  std::vector<MetricPoint> out;
  if (fine_.empty() || to_ms < from_ms) return out;
  int64_t now = fine_.back().mean.at_ms;
  // The finest resolution that still reaches back to from_ms; its open
  // point (the span under way) counts too.
  std::vector<MetricPoint> source;
  int64_t resolution = 0;
  if (from_ms >= now - kFineKeptMs) {
    source.assign(fine_.begin(), fine_.end());
  } else if (from_ms >= now - kMinutesKeptMs) {
    source.assign(minutes_.begin(), minutes_.end());
    if (open_minute_.start >= 0) source.push_back(open_minute_.point);
    resolution = kMinuteSpanMs;
  } else {
    source.assign(hours_.begin(), hours_.end());
    if (open_hour_.start >= 0) source.push_back(open_hour_.point);
    resolution = kHourSpanMs;
  }
  span_ms = std::max<int64_t>({span_ms, resolution, 1});
  for (const MetricPoint& p : source) {
    if (p.mean.at_ms < SpanStart(from_ms, resolution ? resolution : 1) || p.mean.at_ms > to_ms)
      continue;
    int64_t start = SpanStart(p.mean.at_ms, span_ms);
    if (out.empty() || out.back().mean.at_ms != start) {
      out.push_back(MetricPoint{});
      out.back().mean.at_ms = start;
    }
    Fold(out.back(), p);
  }
  return out;
}

}  // namespace kiln::control
