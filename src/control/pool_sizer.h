// How many warm copies each snapshot's pool should hold, from its recent
// creates: pure logic (no clock, no engine), so it is tested alone and the
// pool applies its answer.
//
// A pool earns copies by being asked for: an image's warm copy with its
// first create, any other snapshot with its second (a snapshot restored once
// is not worth the memory). Its size covers the creates that arrive while a
// copy is being restored, twice over, and the largest burst seen in the last
// minute. All adaptive pools share one memory budget; when they want more
// than it holds, the largest pool gives up copies first. A pool that has not
// been asked for in `idle_ms` goes back to zero and is forgotten.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

namespace kiln::control {

// Why a pool holds fewer copies than its demand asks for.
enum class PoolLimit { kNone, kMaxSize, kBudget };

struct PoolSizerOptions {
  uint64_t budget_bytes = 0;  // for all adaptive pools together; 0 = none
  int max_size = 32;          // per pool
  int64_t idle_ms = 300'000;  // no create for this long: back to zero
  int64_t window_ms = 60'000;
  int64_t burst_ms = 250;  // creates this close together count as one burst
};

struct PoolPlan {
  int demand = 0;  // what the arrivals ask for
  int size = 0;    // what fits
  PoolLimit limit = PoolLimit::kNone;
};

class PoolSizer {
 public:
  explicit PoolSizer(PoolSizerOptions options) : options_(options) {}

  // A create asked for `id` at `now_ms`. `image_warm`: an image's warm copy.
  void Arrived(const std::string& id, int64_t now_ms, bool image_warm);
  // A copy of `id` took `restore_ms` to restore and holds `bytes`.
  void Restored(const std::string& id, int64_t restore_ms, uint64_t bytes);
  void Forget(const std::string& id);
  // The size of every pool with demand; a pool missing from the answer
  // wants none (and was forgotten if idle).
  std::map<std::string, PoolPlan> Plan(int64_t now_ms);
  const PoolSizerOptions& options() const { return options_; }

 private:
  struct Demand {
    std::deque<int64_t> arrivals;  // within the window, oldest first
    int64_t last_ms = 0;
    int64_t first_ms = 0;
    int seen = 0;  // creates since the pool was last forgotten
    bool image_warm = false;
    int64_t restore_ms = 200;  // until one is measured
    bool measured = false;
    uint64_t bytes = 32ull << 20;
  };
  int WantedBy(const Demand& d, int64_t now_ms) const;

  const PoolSizerOptions options_;
  std::map<std::string, Demand> demand_;
};

}  // namespace kiln::control
