// Admission for work that one front runs a few of at once (SandboxFusion's
// programs, whose timeouts are wall-clock, so they wait for a slot rather
// than for a core), shared fairly between API keys:
//  - at most `limit` slots are held at once, and at most `per_key` by one
//    key, so a key that floods the front leaves slots for the others;
//  - a freed slot goes to the keys that wait in turn (round robin), each
//    key's waiters first come, first served;
//  - at most `queue_per_key` of one key's requests wait at once; past that
//    a Take is refused at once (kQueueFull), so a key fills no unbounded
//    line. A waiter holds no request body: callers take the slot first.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace kiln::control {

class FairSlots {
 public:
  struct Options {
    int limit = 1;
    int per_key = 1;
    int queue_per_key = 256;
  };
  explicit FairSlots(Options options);
  FairSlots(const FairSlots&) = delete;
  FairSlots& operator=(const FairSlots&) = delete;

  enum class Result { kGranted, kQueueFull, kGaveUp };
  // Waits for a slot for `key`, polling `gone` (the client hung up: it must
  // be cheap) every `poll_ms`. On kGranted *slot holds it until the handle
  // goes.
  Result Take(const std::string& key, const std::function<bool()>& gone,
              std::shared_ptr<void>* slot, int poll_ms = 200);

  int running(const std::string& key) const;
  int waiting(const std::string& key) const;
  const Options& options() const { return options_; }

 private:
  struct Waiter {
    bool granted = false;
  };
  struct KeyLine {
    int running = 0;
    std::deque<Waiter*> waiting;
  };
  // Grants free slots in turn; called with mu_ held after any change.
  void Grant();
  void Release(const std::string& key);
  // Forgets `key`'s line once it holds and waits for nothing.
  void Tidy(const std::string& key);

  const Options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int running_ = 0;
  std::map<std::string, KeyLine> keys_;
  std::list<std::string> turns_;  // keys with waiters, whose turn comes first
};

}  // namespace kiln::control
