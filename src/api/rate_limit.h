// Per-caller request rate limits: a token bucket for each API key (and for
// each client address on requests without a valid key), so one caller that
// floods kilnd is refused early instead of queueing ahead of everyone else.
// The buckets hold no I/O and take a clock, so the arithmetic is unit-tested
// without sleeping.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace kiln::api {

// `rate` tokens a second, at most `burst` saved up; each request takes one.
// A caller that paused may spend its saved burst at once, then only the rate.
class TokenBucket {
 public:
  TokenBucket(double rate, double burst, int64_t now_ms)
      : rate_(rate), burst_(burst), tokens_(burst), last_ms_(now_ms) {}

  // Takes a token. On refusal nothing is taken and *wait_ms (if given) is
  // how long until one is there.
  bool Take(int64_t now_ms, int64_t* wait_ms = nullptr);
  // Whether the bucket is full at now_ms: a caller idle that long is
  // indistinguishable from a new one, so its bucket may be dropped.
  bool Full(int64_t now_ms) const;

 private:
  void Refill(int64_t now_ms);

  double rate_, burst_;
  double tokens_;
  int64_t last_ms_;
};

class RateLimiter {
 public:
  struct Options {
    double rate = 0;  // requests a second; 0: no limit
    int burst = 0;    // 0: max(1, 2 x rate)
  };
  using Clock = std::function<int64_t()>;  // milliseconds, never stepping back

  explicit RateLimiter(Options options, Clock clock = nullptr);

  bool enabled() const { return options_.rate > 0; }
  double rate() const { return options_.rate; }
  int burst() const { return options_.burst; }

  // Takes one request from `who`'s bucket ("key:ID", "ip:ADDR"). nullopt
  // when it may go on, else the whole seconds to wait (>= 1) for the next.
  std::optional<int> Take(const std::string& who);

  // Buckets held (for tests): full ones are dropped now and then, so the
  // map does not grow with every address ever seen.
  size_t size() const;

 private:
  void DropFullBuckets(int64_t now_ms);

  Options options_;
  Clock clock_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, TokenBucket> buckets_;
  int64_t last_sweep_ms_ = 0;
};

}  // namespace kiln::api
