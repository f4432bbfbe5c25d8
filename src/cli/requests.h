// Turns parsed flags into API request bodies and targets. Pure functions,
// so every flag→field mapping is checked (and tested) before any request.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "common/contract.h"

namespace kiln::cli {

// Exec stdin travels base64 (4/3 larger) inside a JSON body of at most
// 16 MiB; keep room for the rest of the body.
inline constexpr std::size_t kMaxStdinBytes = 12 * 1024 * 1024 - 64 * 1024;
inline constexpr long long kDefaultExecTimeoutMs = contract::kExecTimeoutMs.def;

// POST /v1/sandboxes body from --vcpu --memory --disk --timeout --name
// --label k=v --env K=V --snapshot ID --internet --allow --deny
// --no-internet --trial|--paid --max-cost --max-total-cost --idle-pause
// --auto-wake --on-lease-end --persistent --no-sudo --get-or-create (only
// the flags given; the daemon fills defaults).
nlohmann::json SandboxCreateBody(const ParsedArgs& args);

// POST …:wake body from --timeout S (a new lease).
nlohmann::json WakeBody(const ParsedArgs& args);

// POST …/processes body: argv, --cwd, --env K=V, --timeout-ms N (0 = none).
nlohmann::json SpawnBody(const ParsedArgs& args, const std::vector<std::string>& argv);

// POST …/processes/{pid}:signal body from --signal (TERM or SIGTERM, ...;
// default SIGTERM).
nlohmann::json SignalBody(const ParsedArgs& args);

// POST …:exec body: argv (no shell), --cwd, --env K=V, --timeout-ms, or
// --timeout S (seconds; run's), stdin.
// Streamed exec asks for base64 output so binary output survives intact.
nlohmann::json ExecBody(const ParsedArgs& args, const std::vector<std::string>& argv, bool stream,
                        const std::optional<std::string>& stdin_bytes);

// HTTP deadline for an exec: the command's own timeout plus the time kilnd
// may take past it to answer (contract::kExecGraceMs).
std::chrono::milliseconds ExecHttpTimeout(const nlohmann::json& exec_body);

// POST /v1/keys body from --name, --daily-limit-micros N (>= 0), --admin.
nlohmann::json KeyCreateBody(const ParsedArgs& args);

// GET /v1/sandboxes target from --all --state --label k=v (sent as k:v).
std::string ListTarget(const ParsedArgs& args, const std::optional<std::string>& cursor);

// How long a create or fork may wait in line for capacity: --wait S (0–120,
// the daemon's cap; default 120), sent as `Prefer: wait=S`.
inline constexpr int kDefaultWaitSeconds = 120;
int WaitSeconds(const ParsedArgs& args);

// A random version 4 UUID, the Idempotency-Key of one create-like request.
std::string NewIdempotencyKey();

// POST …:snapshot body from --name, --label K=V, --retention-days N.
nlohmann::json SnapshotBody(const ParsedArgs& args);

// POST …:fork body from --count N, --label K=V, --keep-snapshot, and
// --internet/--allow/--deny (the copies' policy instead of the source's).
nlohmann::json ForkBody(const ParsedArgs& args);

// A sandbox's network policy ({"internet", "allow", "deny"}) from
// --internet on|off, --allow H and --deny H (both repeatable, and a value
// may list several hosts comma-separated); nullopt when none is given.
// --allow implies --internet on, so --internet off with --allow is
// refused. `replaces` says the policy replaces rules already in force
// (fork, PUT): then --internet must be given unless --allow is, as a lone
// --deny would otherwise turn the internet off; else it defaults to off.
std::optional<nlohmann::json> NetworkPolicy(const ParsedArgs& args, bool replaces);

// `sandbox network`: the PUT …/network body, or nullopt to show the policy
// (no --internet/--allow/--deny). Also refuses --log next to those flags,
// and --limit without --log or out of 1-500.
std::optional<nlohmann::json> NetworkPutBody(const ParsedArgs& args);

// GET /v1/sandboxes/{id}/network/log target, with --limit N as the page size.
std::string NetworkLogTarget(const std::string& id, const ParsedArgs& args,
                             const std::optional<std::string>& cursor);

// POST …:pause body from --files-only (memory false).
nlohmann::json PauseBody(const ParsedArgs& args);
// GET …/metrics target from --range (15m 1h 6h 24h 7d 30d; the server's default).
std::string MetricsTarget(const std::string& id, const ParsedArgs& args);

// POST …:extend body from --seconds N.
nlohmann::json ExtendBody(const ParsedArgs& args);

// GET /v1/snapshots target from --sandbox ID and --name N.
std::string SnapshotListTarget(const ParsedArgs& args, const std::optional<std::string>& cursor);

// GET /v1/usage target from --from/--to (RFC 3339, or "7d", "12h", "30m"
// meaning that long before `now`) and --group-by key|label:NAME.
std::string UsageTarget(const ParsedArgs& args, std::chrono::system_clock::time_point now);

}  // namespace kiln::cli
