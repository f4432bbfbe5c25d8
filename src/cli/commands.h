// The verbs' entry points and the steps several of them share.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/context.h"

namespace kiln::cli {

// kiln sandbox …: each returns the process exit status.
int CmdSandboxRun(Context& ctx, const ParsedArgs& args);
int CmdSandboxCreate(Context& ctx, const ParsedArgs& args);
int CmdSandboxLs(Context& ctx, const ParsedArgs& args);
int CmdSandboxGet(Context& ctx, const ParsedArgs& args);
int CmdSandboxExec(Context& ctx, const ParsedArgs& args);
int CmdSandboxStop(Context& ctx, const ParsedArgs& args);
int CmdSandboxRm(Context& ctx, const ParsedArgs& args);
int CmdSandboxExtend(Context& ctx, const ParsedArgs& args);
int CmdSandboxSnapshot(Context& ctx, const ParsedArgs& args);
int CmdSandboxFork(Context& ctx, const ParsedArgs& args);
int CmdSandboxNetwork(Context& ctx, const ParsedArgs& args);

// kiln snapshot …
int CmdSnapshotLs(Context& ctx, const ParsedArgs& args);
int CmdSnapshotGet(Context& ctx, const ParsedArgs& args);
int CmdSnapshotRm(Context& ctx, const ParsedArgs& args);

// kiln usage, kiln completion
int CmdUsage(Context& ctx, const ParsedArgs& args);
int CmdCompletion(Context& ctx, const ParsedArgs& args);

// kiln keys …
int CmdKeysCreate(Context& ctx, const ParsedArgs& args);
int CmdKeysLs(Context& ctx, const ParsedArgs& args);
int CmdKeysRevoke(Context& ctx, const ParsedArgs& args);

// kiln server …: replaces this process with kilnd; returns only on failure.
int CmdServer(const std::vector<std::string>& args);

// POST /v1/sandboxes, waiting up to `wait_seconds` for capacity (sent as
// `Prefer: wait=N`), exactly once (see PostOnce); the answer may still
// say "starting" (see below).
nlohmann::json CreateSandbox(Context& ctx, const nlohmann::json& body, int wait_seconds);

// Polls until the sandbox leaves "starting"; throws unless it is running.
nlohmann::json WaitUntilRunning(Context& ctx, nlohmann::json info, bool interruptible);

// Stops a sandbox; failures become a warning (cleanup must not mask the
// command's own result).
void StopSandboxQuietly(Context& ctx, const std::string& id);

// The table `sandbox ls` and `sandbox fork` print: ID STATE VCPU MEMORY CREATED.
std::string SandboxTable(const nlohmann::json& sandboxes);

// How long a create or fork may take: the wait in line, then the boot.
std::chrono::milliseconds CreateTimeout(int wait_seconds);

}  // namespace kiln::cli
