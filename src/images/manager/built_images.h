// Dockerfiles a front boots as they are, with no image named first:
// Daytona's create with buildInfo (Image.from_dockerfile, Image.base(x)
// with steps). The first create that sends one builds it as the caller's
// own image, named after its content ("built/<sha256 of the Dockerfile and
// its context>", first 24 hex digits); that create waits for the build as
// it waits for room, and later ones boot the image's warm copy. A failed
// build is the answer for kRetryFailedMs, then built again.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "common/path_ids.h"
#include "common/status.h"
#include "images/manager/image_waiters.h"

namespace kiln::images {

class ImageManager;

class BuiltImages {
 public:
  static constexpr int64_t kRetryFailedMs = 60 * 1000;

  explicit BuiltImages(ImageManager& images);

  // The kiln name a Dockerfile and context are kept under.
  static std::string NameOf(const std::string& dockerfile,
                            const std::optional<Sha256Digest>& context);

  // The id of `owner`'s ready image built from `dockerfile` (over its
  // uploaded `context`, if any), its build started first when there is
  // none. Waits until `deadline` (or `cancelled`): kNoCapacity with
  // Retry-After if the build has not finished then; kInvalidRequest
  // naming a failed build's step and reason, for kRetryFailedMs.
  Result<std::string> Ensure(const std::string& dockerfile,
                             const std::optional<Sha256Digest>& context, const std::string& owner,
                             std::chrono::steady_clock::time_point deadline,
                             const std::function<bool()>& cancelled);

 private:
  Result<std::string> LookOrStart(const std::string& dockerfile,
                                  const std::optional<Sha256Digest>& context,
                                  const std::string& name, const std::string& owner);

  ImageManager& images_;
  std::mutex mu_;  // one build started at a time
  ImageWaiters waiters_;
};

}  // namespace kiln::images
