#include "control/capacity.h"

#include <algorithm>

namespace kiln::control {

Capacity::Capacity(CapacityLimits limits) : limits_(limits) {
  watcher_ = std::jthread([this](std::stop_token stop) { WatchHangUps(stop); });
}

Capacity::~Capacity() {
  watcher_.request_stop();
  watcher_.join();
}

bool Capacity::FitsHost(const Shape& s) const {
  return memory_mib_ + s.memory_mib <= limits_.memory_budget_mib() &&
         vcpus_ + s.vcpu <= limits_.vcpu_budget() + 1e-9 &&
         disk_mib_ + s.disk_mib <= limits_.disk_budget_mib();
}

bool Capacity::KeyFull(const std::string& key) const {
  auto it = per_key_.find(key);
  return it != per_key_.end() && it->second >= limits_.key_sandboxes;
}

void Capacity::Take(const std::string& key, const Shape& s) {
  memory_mib_ += s.memory_mib;
  vcpus_ += s.vcpu;
  disk_mib_ += s.disk_mib;
  ++running_;
  ++per_key_[key];
}

void Capacity::Leave(std::list<Waiter>::iterator w) {
  w->cv.notify_one();
  done_.splice(done_.end(), line_, w);
}

void Capacity::Grant() {
  if (closed_) return;
  for (auto it = line_.begin(); it != line_.end();) {
    auto w = it++;
    if (KeyFull(w->key)) continue;
    if (!FitsHost(w->shape)) break;  // strict order: nobody overtakes the head
    // The watcher may not have seen a hang-up yet: room for nobody would
    // start a sandbox nobody gets.
    if (w->cancelled && (*w->cancelled)()) {
      w->gone = true;
      Leave(w);
      continue;
    }
    Take(w->key, w->shape);
    w->granted = true;
    Leave(w);
  }
}

void Capacity::WatchHangUps(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    bool watching = false;
    for (auto it = line_.begin(); it != line_.end();) {
      auto w = it++;
      if (!w->cancelled) continue;
      watching = true;
      if ((*w->cancelled)()) {
        w->gone = true;
        Leave(w);
      }
    }
    auto someone_to_watch = [&] {
      return std::any_of(line_.begin(), line_.end(), [](const Waiter& w) { return w.cancelled; });
    };
    if (watching)
      watcher_cv_.wait_for(lock, stop, std::chrono::milliseconds(500), [] { return false; });
    else
      watcher_cv_.wait(lock, stop, someone_to_watch);
  }
}

Capacity::Result Capacity::Acquire(const std::string& key, const Shape& shape,
                                   std::chrono::steady_clock::time_point deadline,
                                   const std::function<bool()>& cancelled) {
  if (!EverFits(shape)) return Result::kNeverFits;
  std::unique_lock lock(mu_);
  if (closed_) return Result::kNoCapacity;
  int& waiting = waiting_per_key_[key];
  if (limits_.key_waiting > 0 && waiting >= limits_.key_waiting) return Result::kLineFull;
  ++waiting;
  struct Counted {  // this Acquire stops counting however it ends
    std::map<std::string, int>& by_key;
    const std::string& key;
    ~Counted() {
      if (auto it = by_key.find(key); it != by_key.end() && --it->second <= 0) by_key.erase(it);
    }
  } counted{waiting_per_key_, key};
  auto me = line_.emplace(line_.end());
  me->key = key;
  me->shape = shape;
  Grant();
  if (!me->granted) {
    if (cancelled) {
      me->cancelled = &cancelled;
      watcher_cv_.notify_one();
    }
    me->cv.wait_until(lock, deadline, [&] { return me->granted || me->gone; });
  }
  bool granted = me->granted;
  bool key_full = !granted && KeyFull(key);
  (granted || me->gone ? done_ : line_).erase(me);
  if (!granted) {
    Grant();  // a head that gave up may unblock those behind it
    return key_full ? Result::kQuotaExceeded : Result::kNoCapacity;
  }
  return Result::kGranted;
}

void Capacity::Release(const std::string& key, const Shape& shape) {
  std::lock_guard lock(mu_);
  memory_mib_ = std::max<int64_t>(0, memory_mib_ - shape.memory_mib);
  vcpus_ = std::max(0.0, vcpus_ - shape.vcpu);
  disk_mib_ = std::max<int64_t>(0, disk_mib_ - shape.disk_mib);
  running_ = std::max(0, running_ - 1);
  auto it = per_key_.find(key);
  if (it != per_key_.end() && --it->second <= 0) per_key_.erase(it);
  Grant();
}

void Capacity::Close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  while (!line_.empty()) {
    line_.front().gone = true;
    Leave(line_.begin());
  }
}

void Capacity::Adopt(const std::string& key, const Shape& shape) {
  std::lock_guard lock(mu_);
  Take(key, shape);
}

bool Capacity::TakeForPool(const Shape& shape) {
  std::lock_guard lock(mu_);
  if (closed_ || !FitsHost(shape)) return false;
  if (!line_.empty()) return false;  // a create waits: the room is its
  memory_mib_ += shape.memory_mib;
  vcpus_ += shape.vcpu;
  disk_mib_ += shape.disk_mib;
  ++pooled_;
  return true;
}

void Capacity::ReleasePool(const Shape& shape) {
  std::lock_guard lock(mu_);
  memory_mib_ = std::max<int64_t>(0, memory_mib_ - shape.memory_mib);
  vcpus_ = std::max(0.0, vcpus_ - shape.vcpu);
  disk_mib_ = std::max<int64_t>(0, disk_mib_ - shape.disk_mib);
  pooled_ = std::max(0, pooled_ - 1);
  Grant();
}

void Capacity::HandOut(const std::string& key, const Shape&) {
  std::lock_guard lock(mu_);
  pooled_ = std::max(0, pooled_ - 1);
  ++running_;
  ++per_key_[key];
}

bool Capacity::KeyHasRoom(const std::string& key) const {
  std::lock_guard lock(mu_);
  return !KeyFull(key);
}

Capacity::Stats Capacity::stats() const {
  std::lock_guard lock(mu_);
  return {memory_mib_, vcpus_, disk_mib_, running_, static_cast<int>(line_.size()), pooled_};
}

int Capacity::RetryAfterSeconds() const {
  // Sandboxes come and go in seconds; a longer line means a longer wait.
  std::lock_guard lock(mu_);
  return static_cast<int>(std::clamp<size_t>(1 + line_.size() / 8, 1, 30));
}

}  // namespace kiln::control
