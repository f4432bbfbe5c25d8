#include "images/manager/pulled_images.h"

#include <cctype>

#include "common/log.h"
#include "images/manager/image_manager.h"

namespace kiln::images {

using nlohmann::json;

PulledImages::PulledImages(ImageManager& images) : images_(images) {}

Result<std::pair<std::string, std::string>> PulledImages::NameOf(const ImageRef& ref) {
  std::string registry;
  for (char c : ref.domain) {
    if (c == ':') {
      registry += '-';
    } else if (c != '[' && c != ']') {
      registry += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  std::string name = "pulled/" + registry + "/" + ref.path;
  if (Status s = ValidateImageName(name); !s.ok())
    return Status(Code::kInvalidRequest, "the image reference " + ref.String() +
                                             " is too long to keep as a kiln image (" +
                                             s.message() + ")");
  std::string tag = ref.tag.value_or("latest");
  if (ref.digest) tag = "sha256-" + ref.digest->substr(ref.digest->find(':') + 1);
  return std::make_pair(std::move(name), std::move(tag));
}

Result<std::string> PulledImages::LookOrStart(const ImageRef& ref, const std::string& name,
                                              const std::string& tag, const std::string& owner) {
  std::lock_guard lock(mu_);
  const std::string wanted = ref.String();
  // The newest version pulled from this reference says where it is (List
  // is newest first).
  for (const ImageRecord& rec : images_.List(owner, name, std::nullopt)) {
    if (rec.owner != owner || rec.ref != wanted) continue;
    auto standing = ImageStanding(rec, kRetryFailedMs, [&](const std::string& why) {
      return Status(Code::kInvalidRequest,
                    "the pull of " + wanted + " failed: " + why + " (its log: GET /v1/images/" +
                        rec.id + "/logs); it is pulled again when next asked for after a minute",
                    json{{"imageId", rec.id}, {"reference", wanted}});
    });
    if (standing) return *standing;
    break;  // failed long ago, or deleted: pulled again
  }
  ImageRequest req;
  req.owner = owner;
  req.name = name;
  req.tags = {tag};
  req.source = ImageSource::kImage;
  req.image_ref = ref;
  req.labels = {{"kiln.pulled-for", "a front's create"}};
  Result<ImageRecord> queued = images_.Submit(std::move(req));
  if (!queued.ok()) return queued.status();
  LogInfo("image pull for a create started",
          {{"event", "image.pulled"}, {"reference", wanted}, {"imageId", queued->id}});
  return std::string();
}

Result<std::string> PulledImages::Ensure(const ImageRef& ref, const std::string& owner,
                                         std::chrono::steady_clock::time_point deadline,
                                         const std::function<bool()>& cancelled) {
  auto named = NameOf(ref);
  if (!named.ok()) return named.status();
  const std::string name = named->first, tag = named->second;
  Status busy = Status(Code::kNoCapacity, "the image " + ref.String() +
                                              " is being pulled for its first use by this key "
                                              "(once; later creates boot it at once): retry")
                    .WithRetryAfter(10);
  return waiters_.Wait(
      owner, [&] { return LookOrStart(ref, name, tag, owner); }, busy, deadline, cancelled);
}

}  // namespace kiln::images
