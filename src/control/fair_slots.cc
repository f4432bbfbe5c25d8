#include "control/fair_slots.h"

#include <algorithm>
#include <chrono>

namespace kiln::control {

FairSlots::FairSlots(Options options) : options_(options) {}

FairSlots::Result FairSlots::Take(const std::string& key, const std::function<bool()>& gone,
                                  std::shared_ptr<void>* slot, int poll_ms) {
  std::unique_lock lock(mu_);
  KeyLine& line = keys_[key];
  if (static_cast<int>(line.waiting.size()) >= options_.queue_per_key) {
    Tidy(key);
    return Result::kQueueFull;
  }
  Waiter me;
  line.waiting.push_back(&me);
  if (line.waiting.size() == 1) turns_.push_back(key);
  Grant();
  while (!me.granted) {
    if (gone && gone()) {
      KeyLine& mine = keys_[key];
      std::erase(mine.waiting, &me);
      if (mine.waiting.empty()) turns_.remove(key);
      Tidy(key);
      return Result::kGaveUp;
    }
    cv_.wait_for(lock, std::chrono::milliseconds(poll_ms));
  }
  // Non-null (callers test it); the deleter frees the slot, not `this`.
  *slot = std::shared_ptr<void>(this, [this, key](void*) { Release(key); });
  return Result::kGranted;
}

void FairSlots::Grant() {
  bool granted = false;
  while (running_ < options_.limit) {
    auto turn = std::find_if(turns_.begin(), turns_.end(), [this](const std::string& k) {
      return keys_[k].running < options_.per_key;
    });
    if (turn == turns_.end()) break;
    std::string key = *turn;
    turns_.erase(turn);
    KeyLine& line = keys_[key];
    line.waiting.front()->granted = true;
    line.waiting.pop_front();
    ++line.running;
    ++running_;
    if (!line.waiting.empty()) turns_.push_back(key);  // its next waits its turn
    granted = true;
  }
  if (granted) cv_.notify_all();
}

void FairSlots::Release(const std::string& key) {
  std::lock_guard lock(mu_);
  --running_;
  --keys_[key].running;
  Tidy(key);
  Grant();
}

void FairSlots::Tidy(const std::string& key) {
  auto it = keys_.find(key);
  if (it != keys_.end() && it->second.running == 0 && it->second.waiting.empty()) keys_.erase(it);
}

int FairSlots::running(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = keys_.find(key);
  return it == keys_.end() ? 0 : it->second.running;
}

int FairSlots::waiting(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = keys_.find(key);
  return it == keys_.end() ? 0 : static_cast<int>(it->second.waiting.size());
}

}  // namespace kiln::control
