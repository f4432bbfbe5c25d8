#include "api/rate_limit.h"

#include <algorithm>
#include <cmath>

#include "common/time.h"

namespace kiln::api {

namespace {
// How often the map is swept for full buckets, and the size past which a
// sweep runs at once (a flood of new addresses).
constexpr int64_t kSweepEveryMs = 60'000;
constexpr size_t kSweepAtSize = 100'000;
}  // namespace

void TokenBucket::Refill(int64_t now_ms) {
  if (now_ms <= last_ms_) return;
  tokens_ = std::min(burst_, tokens_ + rate_ * static_cast<double>(now_ms - last_ms_) / 1000.0);
  last_ms_ = now_ms;
}

bool TokenBucket::Take(int64_t now_ms, int64_t* wait_ms) {
  Refill(now_ms);
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return true;
  }
  if (wait_ms) *wait_ms = static_cast<int64_t>(std::ceil((1.0 - tokens_) * 1000.0 / rate_));
  return false;
}

bool TokenBucket::Full(int64_t now_ms) const {
  double elapsed = now_ms > last_ms_ ? static_cast<double>(now_ms - last_ms_) / 1000.0 : 0;
  return tokens_ + rate_ * elapsed >= burst_;
}

RateLimiter::RateLimiter(Options options, Clock clock)
    : options_(options), clock_(clock ? std::move(clock) : Clock(MonotonicNowMs)) {
  if (options_.burst <= 0)
    options_.burst = std::max(1, static_cast<int>(std::ceil(2 * options_.rate)));
  last_sweep_ms_ = clock_();
}

std::optional<int> RateLimiter::Take(const std::string& who) {
  if (!enabled()) return std::nullopt;
  int64_t now = clock_();
  std::lock_guard lock(mu_);
  if (now - last_sweep_ms_ >= kSweepEveryMs || buckets_.size() >= kSweepAtSize)
    DropFullBuckets(now);
  auto it = buckets_.try_emplace(who, options_.rate, options_.burst, now).first;
  int64_t wait_ms = 0;
  if (it->second.Take(now, &wait_ms)) return std::nullopt;
  return static_cast<int>(std::max<int64_t>(1, (wait_ms + 999) / 1000));
}

size_t RateLimiter::size() const {
  std::lock_guard lock(mu_);
  return buckets_.size();
}

void RateLimiter::DropFullBuckets(int64_t now_ms) {
  last_sweep_ms_ = now_ms;
  std::erase_if(buckets_, [now_ms](const auto& kv) { return kv.second.Full(now_ms); });
}

}  // namespace kiln::api
