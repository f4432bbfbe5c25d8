#include "images/manager/front_images.h"

#include "common/log.h"
#include "images/manager/image_manager.h"

namespace kiln::images {

using nlohmann::json;

FrontImages::FrontImages(ImageManager& images,
                         std::function<std::optional<std::string>()> operator_key,
                         std::vector<Definition> definitions)
    : images_(images),
      operator_key_(std::move(operator_key)),
      definitions_(std::move(definitions)) {}

const FrontImages::Definition* FrontImages::Find(const std::string& name) const {
  for (const auto& d : definitions_)
    if (d.name == name) return &d;
  return nullptr;
}

bool FrontImages::Defines(const std::string& name) const { return Find(name) != nullptr; }

Result<std::string> FrontImages::LookOrStart(const Definition& def, const std::string& owner) {
  std::lock_guard lock(mu_);
  if (auto ready = images_.Resolve(def.name, owner);
      ready.ok() && ready->state == ImageState::kReady)
    return ready->id;
  // The newest version says where its build is (List is newest first).
  for (const ImageRecord& rec : images_.List(owner, def.name, std::nullopt)) {
    if (rec.owner != owner) continue;
    auto standing = ImageStanding(rec, kRetryFailedMs, [&](const std::string& why) {
      return Status(Code::kInvalidRequest,
                    "kilnd's build of " + def.name + ", this front's image, failed: " + why +
                        " (its log: GET /v1/images/" + rec.id +
                        "/logs with an admin key); it is built again when next asked for after "
                        "10 minutes",
                    json{{"imageId", rec.id}});
    });
    if (standing) return *standing;
    break;
  }
  ImageRequest req;
  req.owner = owner;
  req.name = def.name;
  req.source = ImageSource::kRecipe;
  req.recipe = def.recipe;
  req.network = def.network;
  req.build.timeout_seconds = def.build_timeout_seconds;
  req.labels = {{"kiln.front-image", "kilnd"}};
  Result<ImageRecord> queued = images_.Submit(std::move(req));
  if (!queued.ok()) return queued.status();
  LogInfo("front image build started",
          {{"event", "image.front"}, {"name", def.name}, {"imageId", queued->id}});
  return std::string();
}

Result<std::string> FrontImages::Ensure(const std::string& name, const std::string& waiter,
                                        std::chrono::steady_clock::time_point deadline,
                                        const std::function<bool()>& cancelled) {
  const Definition* def = Find(name);
  std::optional<std::string> owner = operator_key_();
  if (!def || !owner) return Status(Code::kImageNotFound, "image " + name + " not found");
  auto building = [&] {
    return Status(Code::kNoCapacity, "the image " + name +
                                         " is being built for its first use on this host "
                                         "(kilnd builds it once; minutes at most): retry")
        .WithRetryAfter(10);
  };
  return waiters_.Wait(
      waiter, [&] { return LookOrStart(*def, *owner); }, building(), deadline, cancelled);
}

}  // namespace kiln::images
