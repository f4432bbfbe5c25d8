// What the PandaStack front's route files share (src/api/pandastack/routes*.cc).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/pandastack/pandastack.h"

namespace kiln::api::pandastack {

// How long a create, fork or wake waits for room before answering 503.
inline constexpr std::chrono::seconds kRoomWait{15};

// The name of the image `image` (an id); "base" for kiln's default.
// The name of `image` as `owner` sees it (its own images and the built-in
// one; any other id is shown as the id).
std::string TemplateName(ApiContext& ctx, const std::optional<std::string>& image,
                         const std::string& owner);
// The sandbox in PandaStack's shape.
nlohmann::json Present(ApiContext& ctx, const control::Sandbox& s);
// The later of Prefer: wait and now + kRoomWait.
control::Deadline CreateDeadline(const Exchange& ex);

// exec, exec/stream, fs (routes_pandastack_io.cc).
void AddIoRoutes(Router& r, ApiContext& ctx);
// snapshots, fork, fork-tree, templates (routes_pandastack_copies.cc).
void AddCopyRoutes(Router& r, ApiContext& ctx);

}  // namespace kiln::api::pandastack
