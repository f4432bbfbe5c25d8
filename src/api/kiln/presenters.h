// The API's objects (docs/api.md), rendered from the control plane's, io's,
// the images' and the stores' types: the only place that decides how a
// sandbox, a snapshot, a file or a build log looks on the wire, and how
// the lines of kiln's NDJSON streams read.
//
// presenters.cc: lists, sandboxes, snapshots and pools, network, keys,
// previews, the host (health, capacity, limits, usage);
// presenters_io.cc: files, processes, exec, watches, the interpreter, the
// terminal's tickets; presenters_images.cc: images, registries, build
// contexts and logs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/context.h"
#include "api/terminal_tickets.h"
#include "control/sandbox.h"
#include "control/sandbox_manager.h"
#include "control/warm_pool.h"
#include "images/manager/build_log.h"
#include "images/manager/image_manager.h"
#include "images/manager/image_record.h"
#include "interpreter/interpreter.h"
#include "io/types.h"
#include "launch/launcher.h"
#include "store/egress_log_store.h"
#include "store/image_catalog.h"
#include "store/key_store.h"
#include "store/preview_store.h"
#include "store/snapshot_store.h"
#include "store/usage_store.h"

namespace kiln::api::v1 {

// ---- Pieces every object uses ----

// An RFC 3339 time; null for 0 (not yet, or never).
nlohmann::json TimeOrNull(int64_t ms);
template <typename T>
nlohmann::json OrNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
// A list: {"data": [...]}.
nlohmann::json ListJson(nlohmann::json data);
// A page of a list: {"data": [...], "nextCursor": the next page's, or null}.
nlohmann::json PageJson(nlohmann::json data, const std::optional<std::string>& next_cursor);

// ---- Sandboxes ----

// SandboxInfo.
nlohmann::json SandboxJson(const control::SandboxRecord& record);
inline nlohmann::json SandboxJson(const control::Sandbox& s) { return SandboxJson(s.Record()); }
// SandboxInfo of each, in order.
nlohmann::json SandboxesJson(const std::vector<std::shared_ptr<control::Sandbox>>& sandboxes);
// The answer to a create: SandboxInfo with `reused` and the image's
// `start` command's state (when it has one).
nlohmann::json LaunchedJson(const launch::Launched& launched);
// The answer to DELETE /v1/sandboxes/{id}.
nlohmann::json DeletedSandboxJson(const control::DeletedSandbox& deleted);
// {latest, points}: the last reading and the points of a range.
nlohmann::json SandboxMetricsJson(const std::optional<control::MetricSample>& latest,
                                  const std::vector<control::MetricPoint>& points);
// The answer to :fork: the copies, and the snapshot a keepSnapshot fork
// kept (none when `kept_snapshot` is null).
nlohmann::json ForkJson(nlohmann::json copies, nlohmann::json kept_snapshot);
// NetworkPolicy: the rules in force, their version and when they changed.
nlohmann::json NetworkPolicyJson(const control::SandboxRecord& record);
// An entry of a sandbox's egress log.
nlohmann::json EgressEntryJson(const store::EgressEntry& entry);

// ---- Snapshots and pools ----

// A warm pool: its size, ready copies, mode (auto|pinned), what demand
// wants and why it holds fewer.
nlohmann::json PoolJson(const control::PoolStatus& pool);
// The demand-sized pools' settings, for /v1/health (read without the
// pools' lock: health must answer while a pool freezes a copy).
nlohmann::json PoolBudgetJson(const control::WarmPoolOptions& options);
// Snapshot, with its warm pool.
nlohmann::json SnapshotJson(const store::SnapshotRecord& record, const control::PoolStatus& pool);
// The answer to :delete of a snapshot (it has no pool any more).
nlohmann::json DeletedSnapshotJson(const store::SnapshotRecord& record, int64_t deleted_ms);

// ---- Keys ----

// ApiKey: {id, name, admin, dailyLimitMicros|null, createdAt, revokedAt|null}.
nlohmann::json ApiKeyJson(const store::ApiKey& key);
// A key just made: ApiKey with its secret, the only time it is shown.
nlohmann::json NewApiKeyJson(const store::ApiKey& key, const std::string& secret);

// ---- Previews ----

// The query parameter a preview's urlWithToken carries its token in.
inline constexpr const char* kPreviewTokenQuery = "kiln_preview_token";
// Preview: its URL and, for a private one, a token expiring at `expiry_ms`
// (nullopt: the preview's own lifetime from now) and the URL with it.
nlohmann::json PreviewJson(const PortSettings& ports, const store::PreviewRecord& preview,
                           std::optional<int64_t> expiry_ms);
// The answer to a preview's DELETE.
nlohmann::json DeletedPreviewJson(const store::PreviewRecord& preview);

// ---- The host ----

// GET /v1/health: kilnd's version and time, the engine's, the pools' budget.
nlohmann::json HealthJson(const control::EngineInfo& engine, const control::WarmPoolOptions& pools);
// GET /v1/limits: the key's spend over the last 24 hours against its daily
// limit (null when it has none).
nlohmann::json LimitsJson(int64_t used_micros, std::optional<int64_t> limit_micros);
// GET /v1/capacity: the host's room now, with `pools` (CapacityPoolJson's).
nlohmann::json CapacityJson(const control::Capacity::Stats& stats,
                            const control::CapacityLimits& limits, nlohmann::json pools);
nlohmann::json CapacityPoolJson(const std::string& snapshot_id, const control::PoolStatus& pool);
// The usage ledger's totals over a span: {"data": per group, "total"}.
nlohmann::json UsageTotalsJson(const std::vector<store::UsageStore::Total>& totals);
// GET /v1/usage over [from, to), with UsageTotalsJson's `totals` and, when
// `bucket_ms` is set, `buckets` (UsageBucketJson's, in order).
nlohmann::json UsageJson(int64_t from_ms, int64_t to_ms, std::optional<int64_t> bucket_ms,
                         const std::string& group_by, nlohmann::json prices,
                         const nlohmann::json& totals, nlohmann::json buckets);
nlohmann::json UsageBucketJson(int64_t from_ms, int64_t to_ms, const nlohmann::json& totals);

// ---- Files (presenters_io.cc) ----

// FileEntry: the sandbox's entry, its time as modifiedAt.
nlohmann::json FileEntryJson(const io::FileEntry& entry);
// The answer to files/stat: a FileEntry with exists, or {exists: false, path}.
nlohmann::json FileStatJson(const io::FileStat& stat);
// The answer to files/list: the entries, and whether a limit cut them
// (`truncated`, only when a limit was asked).
nlohmann::json FileListJson(nlohmann::json entries, std::optional<bool> truncated);
// A file written ({path, size}), an archive unpacked ({path, bytes}).
nlohmann::json FileWrittenJson(const std::string& path, uint64_t size);
nlohmann::json ArchiveUnpackedJson(const std::string& path, uint64_t bytes);

// ---- Processes and exec (presenters_io.cc) ----

// ProcessInfo.
nlohmann::json ProcessJson(const io::ProcessInfo& process);
// ProcessOutputPage: the chunks as (sanitized) text.
nlohmann::json OutputPageJson(const io::OutputPage& page);
// The NDJSON events of an output follow and an exec stream: bytes of a
// stream as (sanitized) text at their offset, output dropped before the
// cursor, a process's end.
nlohmann::json OutputEventJson(io::OutputStream stream, uint64_t offset, std::string_view data);
nlohmann::json OutputDroppedEventJson(const io::OutputPage& page);
nlohmann::json ProcessExitEventJson(const io::ProcessInfo& process);
// CommandResult: how the command ended, its (sanitized) output.
nlohmann::json ExecResultJson(const io::ExecResult& run);
// An exec stream's first event, and its last: how the command ended.
nlohmann::json ExecStartEventJson(const std::string& process_id);
nlohmann::json ExecExitEventJson(const io::ExitStatus& exit);
// One base64 output event as a whole NDJSON line, newline included.
std::string Base64OutputEventLine(io::OutputStream stream, uint64_t offset, std::string_view data);

// ---- Watches (presenters_io.cc) ----

// A file watch (WatchInfo), one of its events, one of its notices ({"k": ...}).
nlohmann::json WatchJson(const io::WatchInfo& watch);
nlohmann::json WatchEventJson(const io::WatchEvent& event);
nlohmann::json WatchNoticeJson(const io::WatchNotice& notice);
// A page of a watch as a poll's answer: {events, notices, nextCursor,
// lostBytes, ended, watch}.
nlohmann::json WatchPollJson(const io::WatchPage& page);
// A page as the lines of a follow: runs of events as one `events` line,
// each notice on its own, each with the cursor past it; the ring's losses
// first, as an overflow (rate).
std::vector<nlohmann::json> WatchFollowLines(const io::WatchPage& page);
// A follow's notices of its own ({"k": paused | end | continue, cursor}),
// and a poll's answer while the sandbox is paused.
nlohmann::json WatchPausedJson(uint64_t cursor);
nlohmann::json WatchGoneJson(uint64_t cursor);
nlohmann::json WatchContinueJson(uint64_t cursor);
nlohmann::json WatchPausedPollJson(uint64_t cursor);

// ---- The interpreter and the terminal (presenters_io.cc) ----

// An interpreter context, an execution, and an execution as the last
// event of a run's stream ({"k": "execution", "execution"}).
nlohmann::json InterpreterContextJson(const interpreter::ContextInfo& context);
nlohmann::json ExecutionJson(const interpreter::Execution& execution);
nlohmann::json ExecutionEventJson(const interpreter::Execution& execution);
// A terminal ticket of `sandbox_id`: {ticket, sandboxId, expiresAt}.
nlohmann::json TerminalTicketJson(const TerminalTickets::Ticket& ticket,
                                  const std::string& sandbox_id);

// ---- Images (presenters_images.cc) ----

// ImageInfo, from an image record (internal parts dropped) and its warm pool.
nlohmann::json ImageJson(const images::ImageRecord& record, const control::PoolStatus& warm_pool);
// A registry credential as listed: {registry, username, createdAt}, never
// the password; and the answer to its :delete.
nlohmann::json RegistryJson(const store::RegistryCredential& credential);
nlohmann::json RegistryDeletedJson(const std::string& registry);
// A build context uploaded ({digest, sizeBytes}); the contexts of a
// missing-list the key lacks, as it spelled them.
nlohmann::json ContextUploadJson(const images::ContextUpload& upload);
nlohmann::json MissingContextsJson(const std::vector<std::string>& missing);
// A page of a build's log, with the image's state now.
nlohmann::json BuildLogPageJson(const images::LogPage& page, images::ImageState state);
// The NDJSON events of a followed build log: a line, the build's end
// (with `image`, ImageInfo), and `continue` (ask again after `after`).
nlohmann::json BuildLogLineEventJson(const images::LogLine& line);
nlohmann::json BuildLogDoneEventJson(nlohmann::json image);
nlohmann::json BuildLogContinueEventJson(int64_t after);

}  // namespace kiln::api::v1
