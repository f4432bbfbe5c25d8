// The API's objects (docs/api.md), rendered from the control plane's and
// the stores' types. The only place that decides how a sandbox, a snapshot
// or a network policy looks on the wire.
#pragma once

#include <nlohmann/json.hpp>

#include "control/sandbox.h"
#include "control/sandbox_manager.h"
#include "control/warm_pool.h"
#include "images/manager/image_record.h"
#include "io/types.h"
#include "store/key_store.h"
#include "store/snapshot_store.h"

namespace kiln::api {

// SandboxInfo.
nlohmann::json SandboxJson(const control::SandboxRecord& record);
inline nlohmann::json SandboxJson(const control::Sandbox& s) { return SandboxJson(s.Record()); }
// The answer to DELETE /v1/sandboxes/{id}.
nlohmann::json DeletedSandboxJson(const control::DeletedSandbox& deleted);
// NetworkPolicy: the rules in force, their version and when they changed.
nlohmann::json NetworkPolicyJson(const control::SandboxRecord& record);
// Snapshot, with its warm pool.
// A warm pool: its size, ready copies, mode (auto|pinned), what demand
// wants and why it holds fewer.
nlohmann::json PoolJson(const control::PoolStatus& pool);
// The demand-sized pools' settings, for /v1/health (read without the
// pools' lock: health must answer while a pool freezes a copy).
nlohmann::json PoolBudgetJson(const control::WarmPoolOptions& options);
nlohmann::json SnapshotJson(const store::SnapshotRecord& record, const control::PoolStatus& pool);
// The answer to :delete of a snapshot (it has no pool any more).
nlohmann::json DeletedSnapshotJson(const store::SnapshotRecord& record, int64_t deleted_ms);

// ImageInfo, from an image record (internal parts dropped) and its warm pool.
nlohmann::json ImageJson(const images::ImageRecord& record, const control::PoolStatus& warm_pool);

// FileEntry: the sandbox's entry, its time as modifiedAt.
nlohmann::json FileEntryJson(const io::FileEntry& entry);
// The answer to files/stat: a FileEntry with exists, or {exists: false, path}.
nlohmann::json FileStatJson(const io::FileStat& stat);
// ProcessInfo.
nlohmann::json ProcessJson(const io::ProcessInfo& process);
// ProcessOutputPage: the chunks as (sanitized) text.
nlohmann::json OutputPageJson(const io::OutputPage& page);
// A file watch (WatchInfo), one of its events, one of its notices ({"k": ...}).
nlohmann::json WatchJson(const io::WatchInfo& watch);
nlohmann::json WatchEventJson(const io::WatchEvent& event);
nlohmann::json WatchNoticeJson(const io::WatchNotice& notice);

// ApiKey: {id, name, admin, dailyLimitMicros|null, createdAt, revokedAt|null}.
nlohmann::json ApiKeyJson(const store::ApiKey& key);

}  // namespace kiln::api
