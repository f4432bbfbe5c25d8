// OCI references a front boots as they are, with no image built first:
// slime names its task's image in a create's metadata ({KEY:
// "registry/swe-image:tag"}, kilnd's --e2b-image-metadata-key KEY). The
// first create that names one pulls it as the caller's own image (its
// registry credentials, --allow-registry, --registry-mirror), named after
// the reference; that create waits for the pull as it waits for room, and
// later ones boot the image's warm copy. Each key pulls its own: a layer
// another key pulled is fetched again (image_manager.h, LayersOf), so one
// key's pull never proves another's access to a private image.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>

#include "common/status.h"
#include "images/manager/image_waiters.h"
#include "images/parse/image_ref.h"

namespace kiln::images {

class ImageManager;

class PulledImages {
 public:
  // A pull that failed is the answer for this long, then tried again.
  static constexpr int64_t kRetryFailedMs = 60 * 1000;

  explicit PulledImages(ImageManager& images);

  // The kiln name and tag a reference's image is kept under:
  // "pulled/<registry>/<path>" (the registry lower case, a port's ':' as
  // '-') and the reference's tag, or "sha256-<hex>" for a digest (which
  // wins over a tag). kInvalidRequest when the name is past a kiln name's
  // 128 characters.
  static Result<std::pair<std::string, std::string>> NameOf(const ImageRef& ref);

  // The id of `owner`'s ready image pulled from `ref`, its pull started
  // first when there is none. Waits until `deadline` (or `cancelled`):
  // kNoCapacity with Retry-After if the pull has not finished then;
  // kInvalidRequest naming a failed pull's reason, for kRetryFailedMs.
  Result<std::string> Ensure(const ImageRef& ref, const std::string& owner,
                             std::chrono::steady_clock::time_point deadline,
                             const std::function<bool()>& cancelled);

 private:
  // One look: the ready image's id; "" when its pull is under way or was
  // just started; a recent failure.
  Result<std::string> LookOrStart(const ImageRef& ref, const std::string& name,
                                  const std::string& tag, const std::string& owner);

  ImageManager& images_;
  std::mutex mu_;  // one pull started at a time
  ImageWaiters waiters_;
};

}  // namespace kiln::images
