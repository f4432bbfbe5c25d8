// The verbs' entry points and the steps several of them share.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
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
// An interactive terminal in the sandbox (commands_shell.cc).
int CmdSandboxShell(Context& ctx, const ParsedArgs& args);
int CmdSandboxPause(Context& ctx, const ParsedArgs& args);
int CmdSandboxWake(Context& ctx, const ParsedArgs& args);
int CmdSandboxMetrics(Context& ctx, const ParsedArgs& args);
int CmdSandboxSpawn(Context& ctx, const ParsedArgs& args);
int CmdSandboxPs(Context& ctx, const ParsedArgs& args);
int CmdSandboxLogs(Context& ctx, const ParsedArgs& args);
int CmdSandboxKill(Context& ctx, const ParsedArgs& args);
int CmdSandboxCp(Context& ctx, const ParsedArgs& args);
int CmdSandboxCat(Context& ctx, const ParsedArgs& args);
int CmdSandboxWatch(Context& ctx, const ParsedArgs& args);
// Ports: the tunnel (commands_forward.cc) and previews (commands_previews.cc).
int CmdSandboxPortForward(Context& ctx, const ParsedArgs& args);
int CmdSandboxPreview(Context& ctx, const ParsedArgs& args);
int CmdSandboxPreviews(Context& ctx, const ParsedArgs& args);
int CmdSandboxPreviewRotate(Context& ctx, const ParsedArgs& args);
int CmdSandboxUnshare(Context& ctx, const ParsedArgs& args);
// The interpreter (commands_interpreter.cc).
int CmdSandboxRunCode(Context& ctx, const ParsedArgs& args);

// kiln snapshot …
int CmdSnapshotLs(Context& ctx, const ParsedArgs& args);
int CmdSnapshotGet(Context& ctx, const ParsedArgs& args);
int CmdSnapshotRm(Context& ctx, const ParsedArgs& args);
int CmdSnapshotExport(Context& ctx, const ParsedArgs& args);
int CmdSnapshotImport(Context& ctx, const ParsedArgs& args);

// kiln image …
int CmdImageBuild(Context& ctx, const ParsedArgs& args);
int CmdImageLs(Context& ctx, const ParsedArgs& args);
int CmdImageGet(Context& ctx, const ParsedArgs& args);
int CmdImageVersions(Context& ctx, const ParsedArgs& args);
int CmdImageRm(Context& ctx, const ParsedArgs& args);
int CmdImageTag(Context& ctx, const ParsedArgs& args);
int CmdImageUntag(Context& ctx, const ParsedArgs& args);
int CmdImageLogs(Context& ctx, const ParsedArgs& args);
int CmdImagePrune(Context& ctx, const ParsedArgs& args);
int CmdImagePool(Context& ctx, const ParsedArgs& args);
int CmdImageRegistry(Context& ctx, const ParsedArgs& args);

// True for an image id (a UUID); anything else is a ref to resolve.
bool IsImageId(std::string_view ref);
// The body of `kiln image build` (POST /v1/images) from its flags: a
// Dockerfile build when `dockerfile` is given, else a recipe from
// --from/--pip/--apt/--npm. Throws UsageError for contradictory flags.
nlohmann::json ImageBuildBody(const ParsedArgs& args, const std::optional<std::string>& dockerfile,
                              const std::optional<std::string>& context_digest);
// "image web build failed at step 3 (Dockerfile line 7) [RUN make]: …" from a failed ImageInfo.
std::string BuildFailureMessage(const nlohmann::json& info);

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
