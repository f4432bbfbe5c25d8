// Creates that wait for an image kilnd makes on their first need (a front's
// default image, a reference a front boots as it is): each polls until the
// image is ready, its making failed, or the create's deadline, at most
// kWaitingPerKey of one key at once so that one key cannot hold kilnd's
// threads on a build.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "common/status.h"

namespace kiln::images {

class ImageWaiters {
 public:
  static constexpr int kWaitingPerKey = 16;
  static constexpr std::chrono::milliseconds kPoll{500};

  // What `look` answers: the ready image's id, "" while it is being made,
  // or why it will not be. `busy` is the answer past the deadline (or to a
  // waiter past its key's cap): a retryable refusal.
  Result<std::string> Wait(const std::string& waiter,
                           const std::function<Result<std::string>()>& look, const Status& busy,
                           std::chrono::steady_clock::time_point deadline,
                           const std::function<bool()>& cancelled);

 private:
  std::mutex mu_;
  std::map<std::string, int> waiting_;  // by key
};

}  // namespace kiln::images
