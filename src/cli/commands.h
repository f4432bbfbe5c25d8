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
int cmd_sandbox_run(Context& ctx, const ParsedArgs& args);
int cmd_sandbox_create(Context& ctx, const ParsedArgs& args);
int cmd_sandbox_ls(Context& ctx, const ParsedArgs& args);
int cmd_sandbox_get(Context& ctx, const ParsedArgs& args);
int cmd_sandbox_exec(Context& ctx, const ParsedArgs& args);
int cmd_sandbox_stop(Context& ctx, const ParsedArgs& args);
int cmd_sandbox_rm(Context& ctx, const ParsedArgs& args);
int cmd_sandbox_extend(Context& ctx, const ParsedArgs& args);
int cmd_sandbox_snapshot(Context& ctx, const ParsedArgs& args);
int cmd_sandbox_fork(Context& ctx, const ParsedArgs& args);
int cmd_sandbox_network(Context& ctx, const ParsedArgs& args);

// kiln snapshot …
int cmd_snapshot_ls(Context& ctx, const ParsedArgs& args);
int cmd_snapshot_get(Context& ctx, const ParsedArgs& args);
int cmd_snapshot_rm(Context& ctx, const ParsedArgs& args);

// kiln usage, kiln completion
int cmd_usage(Context& ctx, const ParsedArgs& args);
int cmd_completion(Context& ctx, const ParsedArgs& args);

// kiln keys …
int cmd_keys_create(Context& ctx, const ParsedArgs& args);
int cmd_keys_ls(Context& ctx, const ParsedArgs& args);
int cmd_keys_revoke(Context& ctx, const ParsedArgs& args);

// kiln server …: replaces this process with kilnd; returns only on failure.
int cmd_server(const std::vector<std::string>& args);

// POST /v1/sandboxes, waiting up to `wait_seconds` for capacity (sent as
// `Prefer: wait=N`), exactly once (see post_once); the answer may still
// say "starting" (see below).
nlohmann::json create_sandbox(Context& ctx, const nlohmann::json& body, int wait_seconds);

// Polls until the sandbox leaves "starting"; throws unless it is running.
nlohmann::json wait_until_running(Context& ctx, nlohmann::json info, bool interruptible);

// Stops a sandbox; failures become a warning (cleanup must not mask the
// command's own result).
void stop_sandbox_quietly(Context& ctx, const std::string& id);

// The table `sandbox ls` and `sandbox fork` print: ID STATE VCPU MEMORY CREATED.
std::string sandbox_table(const nlohmann::json& sandboxes);

// How long a create or fork may take: the wait in line, then the boot.
std::chrono::milliseconds create_timeout(int wait_seconds);

}  // namespace kiln::cli
