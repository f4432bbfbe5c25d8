// The images the vendor fronts boot when a caller has none of its own
// (E2B's code-interpreter-v1, SandboxFusion's language image): each a
// definition kiln ships (front_image_recipes.h) or an operator's
// (--front-image NAME=FILE). kilnd builds one the first time a create
// needs it, once per host, under the operator's key (the oldest live admin
// key), so every key's sandboxes boot it as they boot any image an
// operator built (api/context.h, FindFrontImage). A create that needs one
// while it builds waits as it waits for room; past its deadline it is told
// to come back (kNoCapacity with Retry-After, each front's retryable
// answer). A build that failed is tried again at the first need after
// kRetryFailedMs; until then the failure is the answer.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "images/manager/image_waiters.h"
#include "network/policy.h"

namespace kiln::images {

class ImageManager;

class FrontImages {
 public:
  static constexpr int64_t kRetryFailedMs = 10 * 60 * 1000;
  // Creates of one key that may wait for a build at once; more are told to
  // retry at once (the capacity line's --key-waiting-creates, for builds).
  static constexpr int kWaitingPerKey = ImageWaiters::kWaitingPerKey;

  struct Definition {
    std::string name;         // the image's name, as the front asks for it
    nlohmann::json recipe;    // a recipe (images/parse/recipe.h)
    network::Policy network;  // what its RUN steps may reach
    int build_timeout_seconds = 1800;
  };

  // `operator_key`: the key the images are built under (nullopt: none
  // live, so none can be built).
  FrontImages(ImageManager& images, std::function<std::optional<std::string>()> operator_key,
              std::vector<Definition> definitions);

  bool Defines(const std::string& name) const;

  // The id of the operator's ready image `name`, its build started first
  // when there is none ready or building. Waits for the build until
  // `deadline` (or until `cancelled`), as one of `waiter`'s at most
  // kWaitingPerKey: kNoCapacity with Retry-After if it has not finished;
  // kInvalidRequest naming a failed build's reason (from one less than
  // kRetryFailedMs ago); kImageNotFound for a name it does not define, or
  // with no operator key.
  Result<std::string> Ensure(const std::string& name, const std::string& waiter,
                             std::chrono::steady_clock::time_point deadline,
                             const std::function<bool()>& cancelled);

 private:
  const Definition* Find(const std::string& name) const;
  // One look: the ready image's id; Ok (empty) when a build is under way or
  // was just started; a recent failure.
  Result<std::string> LookOrStart(const Definition& def, const std::string& owner);

  ImageManager& images_;
  std::function<std::optional<std::string>()> operator_key_;
  std::vector<Definition> definitions_;
  std::mutex mu_;  // one build started at a time for a name
  ImageWaiters waiters_;
};

}  // namespace kiln::images
