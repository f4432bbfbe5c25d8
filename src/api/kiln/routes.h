// kiln's own front: the /v1 routes, grouped by resource, and the readers
// of body members several of them share.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "api/context.h"
#include "api/validate.h"
#include "io/types.h"
#include "network/policy.h"

namespace kiln::api {

void AddSandboxRoutes(Router& r, ApiContext& ctx);
void AddExecRoutes(Router& r, ApiContext& ctx);
void AddProcessRoutes(Router& r, ApiContext& ctx);
// /v1/sandboxes/{id}/interpreter:run and .../interpreter/contexts (routes_interpreter.cc).
void AddInterpreterRoutes(Router& r, ApiContext& ctx);
// GET /v1/sandboxes/{id}/terminal, a WebSocket (routes_terminal.cc).
void AddTerminalRoutes(Router& r, ApiContext& ctx);
void AddFileRoutes(Router& r, ApiContext& ctx);
// /v1/sandboxes/{id}/files/watches (routes_watches.cc).
void AddWatchRoutes(Router& r, ApiContext& ctx);
void AddSnapshotRoutes(Router& r, ApiContext& ctx);
// GET /v1/snapshots/{id}/archive, POST /v1/snapshots:import.
void AddSnapshotTransferRoutes(Router& r, ApiContext& ctx);
void AddNetworkRoutes(Router& r, ApiContext& ctx);
// A sandbox's ports: HTTP by path and the tunnel WebSocket (routes_ports.cc).
void AddPortRoutes(Router& r, ApiContext& ctx);
// Previews, and requests by host name {port}-{id}.{domain} (routes_previews.cc).
void AddPreviewRoutes(Router& r, ApiContext& ctx);
// Serves `ex` if its Host names a sandbox's port; false if it does not.
bool ServePortHost(ApiContext& ctx, Exchange& ex);
// A `network` body member (create, fork) as egress rules; issues go to `f`.
std::optional<network::Policy> ReadNetworkField(FieldReader& f);
// A `labels` body member (create, snapshot, fork) within the contract's bounds.
std::optional<std::map<std::string, std::string>> ReadLabels(FieldReader& f);
// A `:pool` body: `{"size": N}` pins the pool (returned), `{"auto": true}`
// gives it back to demand (nullopt). Exactly one of them; issues go to `f`.
std::optional<int> ReadPoolSize(FieldReader& f);

void AddImageRoutes(Router& r, ApiContext& ctx);
void AddUsageRoutes(Router& r, ApiContext& ctx);
void AddMetricsRoutes(Router& r, ApiContext& ctx);

// A sandbox name's characters ([A-Za-z0-9._-]+; the length is the caller's).
bool ValidSandboxName(const std::string& name);

// Reads argv/command, env, user, cwd of a command body (io puts the
// sandbox's env under the command's).
void ReadCommandFields(FieldReader& f, const control::Sandbox& s, io::Command* command);

}  // namespace kiln::api
