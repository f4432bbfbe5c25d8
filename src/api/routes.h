// The /v1 routes, grouped by resource, and what they share.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "api/auth.h"
#include "api/router.h"
#include "api/stream_limit.h"
#include "api/validate.h"
#include "control/sandbox_manager.h"
#include "io/service.h"
#include "launch/launcher.h"
#include "store/egress_log_store.h"
#include "store/key_store.h"

namespace kiln::images {
class ImageManager;
}

namespace kiln::api {

struct ApiContext {
  control::SandboxManager& sandboxes;
  launch::Launcher& launcher;  // every front's creates (launch/launcher.h)
  io::Service& io;             // every front's I/O into a sandbox (io/service.h)
  store::KeyStore& keys;
  store::EgressLogStore& egress_log;
  images::ImageManager* images = nullptr;  // null: no image routes (unit tests)
  StreamLimiter* streams = nullptr;        // null: streams are not capped
};

void AddSandboxRoutes(Router& r, ApiContext& ctx);
void AddExecRoutes(Router& r, ApiContext& ctx);
void AddProcessRoutes(Router& r, ApiContext& ctx);
// GET /v1/sandboxes/{id}/terminal, a WebSocket (routes_terminal.cc).
void AddTerminalRoutes(Router& r, ApiContext& ctx);
void AddFileRoutes(Router& r, ApiContext& ctx);
void AddSnapshotRoutes(Router& r, ApiContext& ctx);
// GET /v1/snapshots/{id}/archive, POST /v1/snapshots:import.
void AddSnapshotTransferRoutes(Router& r, ApiContext& ctx);
void AddNetworkRoutes(Router& r, ApiContext& ctx);
// A `network` body member (create, fork) as egress rules; issues go to `f`.
std::optional<network::Policy> ReadNetworkField(FieldReader& f);
// A `labels` body member (create, snapshot, fork) within the contract's bounds.
std::optional<std::map<std::string, std::string>> ReadLabels(FieldReader& f);

void AddImageRoutes(Router& r, ApiContext& ctx);
void AddUsageRoutes(Router& r, ApiContext& ctx);
void AddMetricsRoutes(Router& r, ApiContext& ctx);

// The sandbox named by the {id} parameter; 404 not_found if unknown or
// another key's (an admin key sees every sandbox).
std::shared_ptr<control::Sandbox> FindSandbox(ApiContext& ctx, Exchange& ex);
// The snapshot `id`, under the same rule; 404 snapshot_not_found.
store::SnapshotRecord FindSnapshot(ApiContext& ctx, const Exchange& ex, const std::string& id);
// Whose resources the caller may see: nullopt for an admin (everyone's).
std::optional<std::string> OwnerScope(const Exchange& ex);

// The `Prefer: wait=N` header as a deadline (N capped at 120 s; none = now).
control::Deadline PreferWaitDeadline(const Exchange& ex);
// A sandbox name's characters ([A-Za-z0-9._-]+; the length is the caller's).
bool ValidSandboxName(const std::string& name);

// A slot for one long-lived stream on `s` (exec stream, output follow,
// terminal, download), held until the returned handle goes; 429
// too_many_streams, naming the cap, when its streams are at the cap.
std::shared_ptr<void> OpenStream(ApiContext& ctx, const control::Sandbox& s);

// 402 spending_limit_reached once the caller's key spent its daily limit.
void CheckSpendingLimit(ApiContext& ctx, Exchange& ex);

// I/O into `s` for `ex`'s caller (io::Service::Reach): a paused sandbox is
// woken first when its autoWake is on; else ApiError sandbox_paused or
// not_running.
io::SandboxIo RunningIo(ApiContext& ctx, Exchange& ex, const control::Sandbox& s);
// The daily spending limit, checked before anything that starts sandboxes
// or lengthens a lease (create, fork, extend, wake, an autoWake).
void CheckSpendingLimit(ApiContext& ctx, const Caller& caller);

// Reads argv/command, env, user, cwd of a command body (io puts the
// sandbox's env under the command's).
void ReadCommandFields(FieldReader& f, const control::Sandbox& s, io::Command* command);

// An optional integer query parameter in [min, max]; 400 naming it otherwise.
int64_t QueryInt(Exchange& ex, const std::string& name, int64_t min, int64_t max, int64_t def);

// A required, absolute path from the query string.
std::string QueryPath(Exchange& ex, const std::string& name = "path");

}  // namespace kiln::api
