// Daytona's API as a front of kilnd, under /daytona, so Daytona's own SDK
// (DAYTONA_API_URL=http://HOST:7070/daytona) drives kiln sandboxes with a
// kiln key as DAYTONA_API_KEY. Its two planes are both here: the control
// plane (/daytona/sandbox...) and the toolbox, which each sandbox answer
// points to (toolboxProxyUrl = .../daytona/toolbox; the SDK calls
// {toolboxProxyUrl}/{sandboxId}{path}). Every call maps onto kiln's own
// services (launch::Launcher, SandboxManager, io::SandboxIo); this front
// reads Daytona's bodies and renders its answers and errors.
// docs/api.md ("Daytona's SDK") lists what is served and refused.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/context.h"
#include "api/front.h"
#include "api/router.h"
#include "common/contract.h"
#include "common/status.h"
#include "control/sandbox_record.h"
#include "io/types.h"
#include "network/policy.h"

namespace kiln::api {

// Registers every /daytona route, the refusals of what kiln lacks last.
void AddDaytonaRoutes(Router& r, ApiContext& ctx);
// Errors in Daytona's shape ({statusCode, message, code, source, path,
// timestamp}), for every request under /daytona/: the SDK maps the status
// (and code) to its own exceptions.
ApiFront::Dialect DaytonaDialect();

namespace daytona {

inline constexpr const char* kPrefix = "/daytona";
inline constexpr const char* kToolboxPrefix = "/daytona/toolbox";
// How long a create, or a start of a stopped sandbox, waits for room.
inline constexpr std::chrono::seconds kRoomWait{30};
// Daytona's idle stop when a create names none, minutes.
inline constexpr int kDefaultAutoStopMinutes = 15;
// The label the SDK sets to the language code_run uses.
inline constexpr const char* kLanguageLabel = "code-toolbox-language";

// POST /sandbox, read.
struct CreateRequest {
  control::SandboxSpec spec;
  // What it boots: a snapshot (Daytona's name for an image) by name, or a
  // Dockerfile (buildInfo.dockerfileContent); neither is kiln's base.
  std::optional<std::string> snapshot;
  std::optional<std::string> dockerfile;
  std::vector<std::string> context_hashes;   // buildInfo.contextHashes
  std::optional<int> queue_timeout_seconds;  // how long it may wait for room
};
// Issues name the field ("body.cpu"); volumes, GPUs and what else kiln
// lacks are refused as not_supported naming them. `lease`: kiln's lease
// bounds (SandboxManager::lease_seconds()).
CreateRequest ReadCreate(const nlohmann::json& body,
                         const contract::IntField& lease = contract::kTimeoutSeconds);

// Daytona's network settings (a create's, or POST .../network-settings)
// as kiln's rules: networkBlockAll, networkAllowList (CIDRs, comma
// separated) and domainAllowList (host names). Nothing said is the
// internet on, as Daytona's default.
network::Policy ReadNetwork(const nlohmann::json& body, const std::string& prefix = "body");

// POST /process/execute: {command, cwd?, envs?, timeout?} (seconds).
struct ExecRequest {
  io::Command command;
  io::ExecOptions options;
};
ExecRequest ReadExecute(const nlohmann::json& body);
// POST /process/code-run: {code, language, argv?, envs?, timeout?}.
ExecRequest ReadCodeRun(const nlohmann::json& body);
// POST /process/session/{sid}/exec: {command, runAsync?}.
struct SessionExec {
  std::string command;
  bool run_async = false;
};
SessionExec ReadSessionExec(const nlohmann::json& body);
// A session's id as the caller names it, checked to be one path
// component of [A-Za-z0-9._-] (1..128, not "." or ".."): it names a
// folder in the sandbox. `field` names it in the error.
std::string ParseSessionId(const std::string& text, const std::string& field);
// POST /files/bulk-download: {paths: [absolute path, ...]}.
std::vector<std::string> ReadDownloadPaths(const nlohmann::json& body);

// Daytona's sandbox (its Sandbox and SandboxListItem: one shape serves
// both), from kiln's record. `toolbox_url`: where its toolbox is.
nlohmann::json SandboxJson(const control::SandboxRecord& r, const std::string& snapshot,
                           const std::string& toolbox_url);
// Daytona's state word for a kiln state: started, stopped (paused),
// starting, stopping, destroyed.
std::string DaytonaState(control::SandboxState state);
// Daytona's FileInfo: {name, isDir, size, mode, modTime, permissions,
// owner, group, path}.
nlohmann::json FileInfoJson(const io::FileEntry& e);

// Answers `s` in Daytona's shape (with Retry-After when it clears on its
// own); nothing if an answer already began.
void SendError(Exchange& ex, const Status& s);
// The status Daytona's SDK reads for a kiln code: kiln's own, but
// no_capacity is 503 with Retry-After, not_supported 501, and a command
// past its timeout 408 (the SDK's DaytonaTimeoutError).
int HttpStatus(Code code);
nlohmann::json ErrorBody(const Status& s, const std::string& path);
// The refusal of a Daytona feature kiln lacks, naming it.
Status Unsupported(const std::string& feature, const std::string& why);

// Inside the front: what its route files share (routes*.cc).
// The toolbox's base URL for the SDK: scheme://Host/daytona/toolbox.
std::string ToolboxUrl(const Exchange& ex);
// The sandbox {id} names in Daytona's shape.
nlohmann::json Present(ApiContext& ctx, const Exchange& ex, const control::Sandbox& s);
// The toolbox's routes: process, sessions, files (routes_toolbox.cc,
// routes_sessions.cc, routes_files.cc).
void AddProcessRoutes(Router& r, ApiContext& ctx);
void AddSessionRoutes(Router& r, ApiContext& ctx);
void AddFileRoutes(Router& r, ApiContext& ctx);
// Daytona's snapshots (kiln images) and the refusal of its volumes
// (routes_snapshots.cc).
void AddSnapshotRoutes(Router& r, ApiContext& ctx);

}  // namespace daytona
}  // namespace kiln::api
