#include "launch/launcher.h"

#include <utility>

#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "images/manager/image_manager.h"

namespace kiln::launch {

Launcher::Launcher(control::SandboxManager& sandboxes, images::ImageManager* images)
    : sandboxes_(sandboxes), images_(images) {
  // A wake that boots afresh runs its image's start command again, as a
  // disk copy's start does (Launch); an image deleted since has none.
  if (images_)
    sandboxes_.OnFreshWake([images](const std::shared_ptr<control::Sandbox>& s) {
      if (!s->spec().image) return;
      auto launch = images->ForSandbox(*s->spec().image, std::nullopt, s->spec().shape);
      if (launch.ok() && launch->start) images->StartIn(s, *launch->start);
    });
}

Status Launcher::CheckSpendingLimit(const std::string& key_id,
                                    std::optional<int64_t> daily_limit_micros) {
  if (!daily_limit_micros) return Status::Ok();
  double spent = sandboxes_.usage().SpentMicrosSince(key_id, StableNowMs() - 86400000);
  if (spent >= static_cast<double>(*daily_limit_micros))
    return Status(Code::kSpendingLimitReached,
                  "this key spent " + std::to_string(static_cast<int64_t>(spent)) +
                      " of its daily limit of " + std::to_string(*daily_limit_micros) +
                      " micro-dollars in the last 24 hours");
  return Status::Ok();
}

Result<control::ForkResult> Launcher::Fork(const std::shared_ptr<control::Sandbox>& source,
                                           const control::ForkOptions& options,
                                           control::Deadline deadline, const Payer& payer) {
  if (Status s = CheckSpendingLimit(payer.key_id, payer.daily_limit_micros); !s.ok()) return s;
  return sandboxes_.Fork(source, options, deadline);
}

Status Launcher::Wake(const std::shared_ptr<control::Sandbox>& sandbox,
                      std::optional<int> lease_seconds, control::Deadline deadline,
                      const Payer& payer) {
  if (Status s = CheckSpendingLimit(payer.key_id, payer.daily_limit_micros); !s.ok()) return s;
  return sandboxes_.Wake(sandbox, lease_seconds, deadline);
}

Result<int64_t> Launcher::Extend(const std::shared_ptr<control::Sandbox>& sandbox, int64_t seconds,
                                 const Payer& payer) {
  if (seconds > 0)
    if (Status s = CheckSpendingLimit(payer.key_id, payer.daily_limit_micros); !s.ok()) return s;
  return sandboxes_.Extend(sandbox, seconds);
}

Result<Launched> Launcher::Reuse(std::shared_ptr<control::Sandbox> holder,
                                 const LaunchRequest& request) {
  Launched out;
  out.in_use = control::Sandbox::Use(holder, StableNowMs());
  if (holder->state() != control::SandboxState::kRunning) {
    if (Status s = CheckSpendingLimit(request.spec.owner, request.daily_limit_micros); !s.ok())
      return s;
    if (Status s = holder->Wake(); !s.ok()) return s;
  }
  out.sandbox = std::move(holder);
  out.reused = true;
  return out;
}

Result<std::optional<images::ImageLaunch>> Launcher::ResolveImage(LaunchRequest& request) {
  control::SandboxSpec& spec = request.spec;
  // A create naming neither an image nor a snapshot runs the built-in image:
  // once warmed, that is a restore of its warm copy (or its pool's copy),
  // not a cold boot.
  if (!request.image && !spec.snapshot && images_) request.image = images_->builtin_id();
  if (!request.image) return std::optional<images::ImageLaunch>();
  if (!images_) return Status(Code::kImageNotFound, "this kilnd serves no images");
  auto launch = images_->ForSandbox(*request.image, request.scope, spec.shape, spec.shape_given);
  if (!launch.ok() && launch.status().code() == Code::kImageNotFound && request.image_fallback)
    launch =
        images_->ForSandbox(*request.image_fallback, request.scope, spec.shape, spec.shape_given);
  if (!launch.ok()) return launch.status();
  // An image's own shape (a template's) where the create names none.
  spec.shape = launch->shape;
  spec.image = launch->image_id;
  spec.rootfs = launch->rootfs;
  spec.run_as = launch->run_as;
  if (!launch->sudo) spec.sudo = false;  // the image's choice; a create cannot undo it
  // A default-size sandbox of a ready image is a restore of its warm copy.
  spec.snapshot = launch->warm_snapshot;
  return std::optional<images::ImageLaunch>(*std::move(launch));
}

Result<Launched> Launcher::Launch(LaunchRequest request) {
  control::SandboxSpec& spec = request.spec;
  if (request.get_or_create && spec.name) {
    if (auto holder = sandboxes_.FindByName(spec.owner, *spec.name))
      return Reuse(std::move(holder), request);
  }
  std::optional<images::StartSpec> disk_start;
  if (spec.snapshot) {
    // Another key's snapshot, or an image's warm copy (reached through its
    // image), is not found.
    auto rec = sandboxes_.snapshots().FindVisible(*spec.snapshot, request.scope,
                                                  control::SnapshotUse::kRead);
    if (!rec) return Status(Code::kSnapshotNotFound, "snapshot " + *spec.snapshot + " not found");
    // A disk copy boots fresh: its image's start command runs again, as at
    // the image's own cold boot (an image deleted since has none to run).
    if (rec->mode == store::SnapshotMode::kDisk && rec->image && images_) {
      auto launch = images_->ForSandbox(*rec->image, std::nullopt, rec->shape);
      if (launch.ok() && launch->start) disk_start = launch->start;
    }
  }
  int64_t resolving = MonotonicNowMs();
  auto image = ResolveImage(request);
  if (!image.ok()) return image.status();
  // A fresh image's root is flattened on its first sandbox: seconds on a busy disk.
  if (int64_t ms = MonotonicNowMs() - resolving; ms >= 1000)
    LogInfo("image resolved slowly", {{"event", "image.resolve_slow"},
                                      {"image", request.image.value_or("")},
                                      {"resolveMs", ms}});
  if (Status s = CheckSpendingLimit(spec.owner, request.daily_limit_micros); !s.ok()) return s;
  const char* op = spec.snapshot ? "restore" : "create";
  int64_t t0 = MonotonicNowMs();
  std::string owner = spec.owner;
  auto created = sandboxes_.Create(std::move(spec), request.deadline, request.cancelled);
  if (!created.ok()) {
    // Two getOrCreates of one name at once: the one that lost answers the
    // winner's sandbox.
    if (created.status().code() == Code::kNameTaken && request.get_or_create) {
      if (auto holder = sandboxes_.FindByName(owner, created.status().details().value("name", "")))
        return Reuse(std::move(holder), request);
    }
    return created.status();
  }
  metrics::ObserveOperation(op, static_cast<double>(MonotonicNowMs() - t0) / 1000.0);
  Launched out;
  out.sandbox = *std::move(created);
  if (disk_start) out.start = images_->StartIn(out.sandbox, *disk_start);
  const std::optional<images::ImageLaunch>& launch = *image;
  if (launch && launch->start) {
    if (launch->warm_snapshot) {
      // The warm copy's start command is running: it was ready when the
      // copy was taken, and is ready now that the copy is restored.
      out.start = {{"state", launch->warm_start.value("state", std::string("ready"))},
                   {"processId", launch->warm_start.value("processId", nlohmann::json(nullptr))},
                   {"readyMs", MonotonicNowMs() - t0}};
    } else {
      out.start = images_->StartIn(out.sandbox, *launch->start);
    }
  }
  return out;
}

}  // namespace kiln::launch
