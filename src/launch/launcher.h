// One launch path for every front (kiln's /v1, PandaStack's, the ones to
// come): a typed request in, a running sandbox out. It resolves the image
// or snapshot for the caller's key, checks the key's spending limit, asks
// control for room and a sandbox, and runs the image's start command. A
// front parses its own wire shape into a LaunchRequest and renders the
// Launched it gets back; it never talks to images, the engine or the
// agent's protocol to make a sandbox.
//
// The other calls that start billing or lengthen it -- fork, wake, extend
// -- go through here too, so the spending rule is written once: a front
// never checks it itself.
//
// The model is Firecracker's VmmAction and containerd's services: the API
// is an adapter, the operation lives once below it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "control/sandbox_manager.h"

#include "images/manager/image_manager.h"

namespace kiln::launch {

struct LaunchRequest {
  // Shape, lease, env, labels, network, name, sudo, persistence; `owner` is
  // the caller's key. `spec.snapshot`: the snapshot to copy (the caller's
  // own; another key's is not found).
  control::SandboxSpec spec;
  // An image reference (id, name, name:tag, name@version) to boot; not with
  // spec.snapshot.
  std::optional<std::string> image;
  // Tried when `image` is not found (PandaStack's default template, which
  // kiln lacks, is kiln's built-in image).
  std::optional<std::string> image_fallback;
  // Whose images and snapshots are visible: nullopt for the admin (any).
  std::optional<std::string> scope;
  // The key's daily spending limit, micro-dollars; nullopt: none.
  std::optional<int64_t> daily_limit_micros;
  // A live sandbox of this key with spec.name is answered instead of a new
  // one (woken if it is paused).
  bool get_or_create = false;
  control::Deadline deadline;
  std::function<bool()> cancelled;  // the client hung up
};

struct Launched {
  std::shared_ptr<control::Sandbox> sandbox;
  bool reused = false;           // get_or_create found it
  std::shared_ptr<void> in_use;  // a reused sandbox's Sandbox::Use(), for the caller to hold
  // The image's start command: {state, processId, readyMs}; null if none.
  nlohmann::json start;
};

// Who pays for what a call starts: the caller's key and its daily limit.
struct Payer {
  std::string key_id;
  std::optional<int64_t> daily_limit_micros;  // nullopt: none
};

class Launcher {
 public:
  // `images` may be null (a kilnd serving no images).
  Launcher(control::SandboxManager& sandboxes, images::ImageManager* images);

  Result<Launched> Launch(LaunchRequest request);

  // control::SandboxManager's Fork, Wake and Extend under the payer's
  // spending limit (a refusal is kSpendingLimitReached, and nothing starts).
  // Extend checks it only when the lease grows.
  Result<control::ForkResult> Fork(const std::shared_ptr<control::Sandbox>& source,
                                   const control::ForkOptions& options, control::Deadline deadline,
                                   const Payer& payer);
  Status Wake(const std::shared_ptr<control::Sandbox>& sandbox, std::optional<int> lease_seconds,
              control::Deadline deadline, const Payer& payer);
  Result<int64_t> Extend(const std::shared_ptr<control::Sandbox>& sandbox, int64_t seconds,
                         const Payer& payer);

  // kSpendingLimitReached if `key_id` spent its daily limit in the last 24
  // hours; every call that starts billing (create, fork, wake, extend, an
  // autoWake) checks it.
  Status CheckSpendingLimit(const std::string& key_id, std::optional<int64_t> daily_limit_micros);

 private:
  // `holder`, get_or_create's answer, woken if it sleeps.
  Result<Launched> Reuse(std::shared_ptr<control::Sandbox> holder, const LaunchRequest& request);
  // Fills `spec` from the image `request` names (its root, user, sudo, warm copy).
  Result<std::optional<images::ImageLaunch>> ResolveImage(LaunchRequest& request);

  control::SandboxManager& sandboxes_;
  images::ImageManager* images_;
};

}  // namespace kiln::launch
