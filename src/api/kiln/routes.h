// Inside kiln's own front (kiln.h): the /v1 routes by resource, one
// routes_*.cc each, all registered by AddKilnRoutes (routes.cc) in the
// order below. Each handler reads its request (requests.h), calls one
// service of ApiContext and renders the answer (presenters.h).
#pragma once

#include "api/context.h"
#include "api/router.h"

namespace kiln::api::v1 {

// /v1/health, /v1/sandboxes and a sandbox's lifecycle (routes_sandboxes.cc).
void AddSandboxRoutes(Router& r, ApiContext& ctx);
// POST /v1/sandboxes/{id}:exec (routes_exec.cc).
void AddExecRoutes(Router& r, ApiContext& ctx);
// /v1/sandboxes/{id}/processes (routes_processes.cc).
void AddProcessRoutes(Router& r, ApiContext& ctx);
// /v1/sandboxes/{id}/interpreter:run and .../interpreter/contexts (routes_interpreter.cc).
void AddInterpreterRoutes(Router& r, ApiContext& ctx);
// GET /v1/sandboxes/{id}/terminal, a WebSocket, and its tickets (routes_terminal.cc).
void AddTerminalRoutes(Router& r, ApiContext& ctx);
// /v1/sandboxes/{id}/files (routes_files.cc).
void AddFileRoutes(Router& r, ApiContext& ctx);
// /v1/sandboxes/{id}/files/watches (routes_watches.cc).
void AddWatchRoutes(Router& r, ApiContext& ctx);
// Snapshots, their pools, forks (routes_snapshots.cc).
void AddSnapshotRoutes(Router& r, ApiContext& ctx);
// GET /v1/snapshots/{id}/archive, POST /v1/snapshots:import (routes_snapshot_transfer.cc).
void AddSnapshotTransferRoutes(Router& r, ApiContext& ctx);
// A sandbox's egress rules and log (routes_network.cc).
void AddNetworkRoutes(Router& r, ApiContext& ctx);
// A sandbox's ports: HTTP by path and the tunnel WebSocket (routes_ports.cc).
void AddPortRoutes(Router& r, ApiContext& ctx);
// Previews (routes_previews.cc, which also serves the host names, kiln.h).
void AddPreviewRoutes(Router& r, ApiContext& ctx);
// /v1/keys, admin keys only (routes_keys.cc).
void AddKeyRoutes(Router& r, ApiContext& ctx);
// /v1/images, build contexts, registry credentials (routes_images.cc).
void AddImageRoutes(Router& r, ApiContext& ctx);
// /v1/usage, /v1/limits, /v1/capacity (routes_usage.cc).
void AddUsageRoutes(Router& r, ApiContext& ctx);
// GET /metrics, admin keys only (routes_metrics.cc).
void AddMetricsRoutes(Router& r, ApiContext& ctx);

}  // namespace kiln::api::v1
