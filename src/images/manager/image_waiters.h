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
#include <optional>
#include <string>

#include "common/status.h"
#include "images/manager/image_record.h"

namespace kiln::images {

// Where a version of an image a waiter waits for stands: its id when
// ready; "" while it is queued or built; `failed(why)` when it failed less
// than retry_ms ago; nullopt when it is to be made again (failed long ago,
// or deleted).
std::optional<Result<std::string>> ImageStanding(
    const ImageRecord& rec, int64_t retry_ms,
    const std::function<Status(const std::string& why)>& failed);

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
