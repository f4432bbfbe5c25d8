#include "control/pool_sizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kiln::control {
namespace {
// Arrivals kept per pool: enough for the window at any rate a host runs.
constexpr size_t kMaxArrivals = 4096;
}  // namespace

void PoolSizer::Arrived(const std::string& id, int64_t now_ms, bool image_warm) {
  Demand& d = demand_[id];
  if (d.seen == 0) d.first_ms = now_ms;
  d.image_warm = image_warm;
  d.last_ms = now_ms;
  d.seen++;
  d.arrivals.push_back(now_ms);
  if (d.arrivals.size() > kMaxArrivals) d.arrivals.pop_front();
}

void PoolSizer::Restored(const std::string& id, int64_t restore_ms, uint64_t bytes) {
  auto it = demand_.find(id);
  if (it == demand_.end()) return;
  Demand& d = it->second;
  restore_ms = std::max<int64_t>(restore_ms, 1);
  if (!d.measured) {
    d.restore_ms = restore_ms;
    d.measured = true;
  } else {
    // A moving average of samples held within 4x of it: one slow restore on
    // a busy host does not double a pool.
    d.restore_ms = (d.restore_ms * 3 + std::min(restore_ms, d.restore_ms * 4)) / 4;
  }
  if (bytes > 0) d.bytes = bytes;
}

void PoolSizer::Forget(const std::string& id) { demand_.erase(id); }

int PoolSizer::WantedBy(const Demand& d, int64_t now_ms) const {
  // A user snapshot restored once is not worth memory; an image's warm copy
  // is what every default create of the image restores.
  if (d.seen < (d.image_warm ? 1 : 2)) return 0;
  // Creates per millisecond over the window (or since the first create).
  int64_t span =
      std::max<int64_t>(now_ms - std::max(d.first_ms, now_ms - options_.window_ms), 1000);
  double rate = static_cast<double>(d.arrivals.size()) / static_cast<double>(span);
  int wanted = static_cast<int>(std::ceil(rate * static_cast<double>(d.restore_ms) * 2.0));
  // The largest burst: creates within burst_ms of each other.
  size_t lo = 0, burst = 0;
  for (size_t hi = 0; hi < d.arrivals.size(); ++hi) {
    while (d.arrivals[hi] - d.arrivals[lo] > options_.burst_ms) ++lo;
    burst = std::max(burst, hi - lo + 1);
  }
  return std::max({1, wanted, static_cast<int>(burst)});
}

std::map<std::string, PoolPlan> PoolSizer::Plan(int64_t now_ms) {
  std::map<std::string, PoolPlan> plan;
  for (auto it = demand_.begin(); it != demand_.end();) {
    Demand& d = it->second;
    while (!d.arrivals.empty() && d.arrivals.front() < now_ms - options_.window_ms)
      d.arrivals.pop_front();
    if (now_ms - d.last_ms >= options_.idle_ms) {
      it = demand_.erase(it);
      continue;
    }
    int wanted = WantedBy(d, now_ms);
    if (wanted > 0) {
      PoolPlan& p = plan[it->first];
      p.demand = wanted;
      p.size = std::min(wanted, options_.max_size);
      if (p.size < wanted) p.limit = PoolLimit::kMaxSize;
    }
    ++it;
  }
  if (options_.budget_bytes == 0) return plan;
  // Over budget: the pool holding the most gives up a copy, until it fits.
  auto bytes_of = [&](const std::string& id, int n) {
    return demand_.at(id).bytes * static_cast<uint64_t>(n);
  };
  uint64_t total = 0;
  for (const auto& [id, p] : plan) total += bytes_of(id, p.size);
  while (total > options_.budget_bytes) {
    std::string largest;
    uint64_t most = 0;
    for (const auto& [id, p] : plan) {
      if (p.size > 0 && bytes_of(id, p.size) > most) {
        most = bytes_of(id, p.size);
        largest = id;
      }
    }
    if (largest.empty()) break;
    PoolPlan& p = plan[largest];
    p.size--;
    p.limit = PoolLimit::kBudget;
    total -= demand_.at(largest).bytes;
  }
  return plan;
}

}  // namespace kiln::control
