#include "images/manager/built_images.h"

#include "common/log.h"
#include "images/manager/image_manager.h"

namespace kiln::images {

using nlohmann::json;

BuiltImages::BuiltImages(ImageManager& images) : images_(images) {}

std::string BuiltImages::NameOf(const std::string& dockerfile,
                                const std::optional<Sha256Digest>& context) {
  std::string key = dockerfile + '\0' + (context ? context->hex() : std::string());
  return "built/" + Sha256Digest::Of(key).hex().substr(0, 24);
}

Result<std::string> BuiltImages::LookOrStart(const std::string& dockerfile,
                                             const std::optional<Sha256Digest>& context,
                                             const std::string& name, const std::string& owner) {
  std::lock_guard lock(mu_);
  // The newest version of the name says where it is (List is newest first).
  for (const ImageRecord& rec : images_.List(owner, name, std::nullopt)) {
    if (rec.owner != owner) continue;
    auto standing = ImageStanding(rec, kRetryFailedMs, [&](const std::string& why) {
      return Status(Code::kInvalidRequest,
                    "the build of this Dockerfile failed: " + why + " (its log: GET /v1/images/" +
                        rec.id + "/logs); it is built again when next asked for after a minute",
                    json{{"imageId", rec.id}});
    });
    if (standing) return *standing;
    break;  // failed long ago, or deleted: built again
  }
  ImageRequest req;
  req.owner = owner;
  req.name = name;
  req.source = ImageSource::kDockerfile;
  req.dockerfile = dockerfile;
  req.context = context;
  req.labels = {{"kiln.built-for", "a front's create"}};
  // RUN steps reach the internet (apt, pip), as a template build's do; the
  // sandboxes it boots have their own rules.
  req.network.internet = true;
  Result<ImageRecord> queued = images_.Submit(std::move(req));
  if (!queued.ok()) return queued.status();
  LogInfo("image build for a create started",
          {{"event", "image.built_for_create"}, {"name", name}, {"imageId", queued->id}});
  return std::string();
}

Result<std::string> BuiltImages::Ensure(const std::string& dockerfile,
                                        const std::optional<Sha256Digest>& context,
                                        const std::string& owner,
                                        std::chrono::steady_clock::time_point deadline,
                                        const std::function<bool()>& cancelled) {
  const std::string name = NameOf(dockerfile, context);
  Status busy = Status(Code::kNoCapacity,
                       "this Dockerfile is being built for its first use by this key (once; "
                       "later creates boot it at once): retry")
                    .WithRetryAfter(10);
  return waiters_.Wait(
      owner, [&] { return LookOrStart(dockerfile, context, name, owner); }, busy, deadline,
      cancelled);
}

}  // namespace kiln::images
