// PandaStack's REST API as a second front of kilnd, under /pandastack/v1, so
// PandaStack's own Python client (PANDASTACK_API=http://HOST:7070/pandastack)
// drives kiln sandboxes with a kiln key. Every call maps onto kiln's own
// operations (launch::Launcher, SandboxManager, io::SandboxIo,
// ImageManager); this front only reads PandaStack's bodies and renders
// PandaStack's answers and errors.
// docs/api.md ("PandaStack's client") lists what is served and refused.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/context.h"
#include "api/front.h"
#include "api/router.h"
#include "common/contract.h"
#include "common/status.h"
#include "control/sandbox_record.h"
#include "images/manager/image_record.h"
#include "io/types.h"
#include "store/snapshot_store.h"

namespace kiln::api {

// Registers every /pandastack/v1 route, refusals of the features kiln does
// not offer included (registered last, after the served routes).
void AddPandaStackRoutes(Router& r, ApiContext& ctx);
// Errors of its routes in PandaStack's shape ({"error": message, "code"});
// the key is kiln's Bearer, and the refusals before a route runs (a
// missing key, a rate limit) keep kiln's shape.
ApiFront::Dialect PandaStackDialect();

namespace pandastack {

inline constexpr const char* kPrefix = "/pandastack/v1";
// PandaStack's client asks for this template when none is named.
inline constexpr const char* kClientDefaultTemplate = "code-interpreter";

// POST /sandboxes, read: the kiln spec, and what steers the route.
struct CreateRequest {
  control::SandboxSpec spec;
  std::string template_name;  // an image reference; ignored with from_snapshot
};
// Issues name the field ("body.ttl_seconds"); volumes are refused as a
// feature kiln lacks.
CreateRequest ReadCreate(const nlohmann::json& body,
                         const contract::IntField& lease = contract::kTimeoutSeconds);

// POST /sandboxes/{id}/exec and /exec/stream: {cmd, timeout_seconds?}.
struct ExecRequest {
  io::Command command;  // a bash command line
  io::ExecOptions options;
};
ExecRequest ReadExec(const nlohmann::json& body);

// PATCH /sandboxes/{id}/lifecycle: {ttl_seconds?, persistent?}.
struct LifecycleChange {
  std::optional<int64_t> ttl_seconds;
  std::optional<bool> persistent;
};
LifecycleChange ReadLifecycle(const nlohmann::json& body,
                              const contract::IntField& lease = contract::kTimeoutSeconds);

// POST /sandboxes/{id}/fork and /fork-tree: {count?, metadata?}.
struct ForkRequest {
  int count = 1;
  std::optional<std::map<std::string, std::string>> metadata;
};
ForkRequest ReadFork(const nlohmann::json& body, bool tree);

// POST /sandboxes/{id}/snapshots: {name?}.
control::SnapshotOptions ReadSnapshot(const nlohmann::json& body);

// What a sandbox answer needs beyond its record.
struct SandboxExtras {
  std::string template_name;                 // the image's name
  std::optional<std::string> from_snapshot;  // a snapshot of the key's it started from
};
// PandaStack's sandbox: {id, template, cpu, memory_mb, status, created_at,
// metadata, from_snapshot, boot_ms, boot_mode, persistent, ...}.
nlohmann::json SandboxJson(const control::SandboxRecord& r, const SandboxExtras& extras);
// PandaStack's status word for a kiln state ("running", "paused", ...).
std::string StatusName(control::SandboxState state);
// GET /sandboxes/{id}/lifecycle: the lease as a TTL (seconds left).
nlohmann::json LifecycleJson(const control::SandboxRecord& r, int64_t now_ms);
// A snapshot: {id, snapshot_id, sandbox_id, template, size_bytes, created_at}.
nlohmann::json SnapshotJson(const store::SnapshotRecord& r, const std::string& template_name);
// A directory entry or stat: {name, path, is_dir, size, mode, mtime}.
nlohmann::json FileInfoJson(const io::FileEntry& e);
// A template from kiln's image record (ImageManager::List's items).
nlohmann::json TemplateJson(const images::ImageRecord& image);

// Answers `s` in PandaStack's shape (with Retry-After when it clears on
// its own); nothing if an answer already began.
void SendError(Exchange& ex, const Status& s);
// The HTTP status PandaStack's client expects for a kiln code: kiln's own,
// but no_capacity is 503 with Retry-After (the client retries creates on
// it) and not_supported is 501.
int HttpStatus(Code code);
// PandaStack's error body: {"error": message, "code": kiln's code name,
// ...details}; the client shows `error`.
nlohmann::json ErrorBody(const Status& s);
// The refusal of a PandaStack feature kiln does not offer, naming it:
// not_supported with details {feature}.
Status Unsupported(const std::string& method, const std::string& path);

}  // namespace pandastack
}  // namespace kiln::api
