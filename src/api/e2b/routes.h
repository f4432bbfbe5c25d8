// Inside the e2b front: what its control-plane files share. requests.cc
// reads E2B's bodies and queries into kiln's requests, presenters.cc renders
// kiln's sandboxes, images and snapshots in E2B's shapes, routes*.cc serve
// them (see e2b.h). Pure functions here are unit-tested
// (tests/unit/api/e2b/control_test.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/context.h"
#include "api/router.h"
#include "common/contract.h"
#include "common/status.h"
#include "control/metrics_history.h"
#include "control/sandbox_record.h"
#include "images/manager/image_record.h"
#include "network/policy.h"
#include "store/snapshot_store.h"

namespace kiln::api::e2b {

// The templates E2B's SDKs ask for when none is named.
inline constexpr const char* kBaseTemplate = "base";                        // e2b
inline constexpr const char* kInterpreterTemplate = "code-interpreter-v1";  // e2b-code-interpreter
// E2B's default lease when a create names none, seconds.
inline constexpr int kDefaultTimeoutSeconds = 300;
// How long a create, connect or resume waits for room before answering 503.
inline constexpr std::chrono::seconds kRoomWait{15};
// A page of GET /v2/sandboxes: E2B's default and largest.
inline constexpr int kDefaultPageSize = 100;
inline constexpr int kMaxPageSize = 100;

// E2B's clients send null for a member they leave out (the code
// interpreter's context_id): `body` without its null members.
nlohmann::json WithoutNulls(const nlohmann::json& body);

// POST /sandboxes and /v2/sandboxes (NewSandbox, NewSandboxV2).
struct CreateRequest {
  control::SandboxSpec spec;
  std::string template_id;  // an image reference, or a snapshot id of the key's
  int timeout_seconds = kDefaultTimeoutSeconds;  // the lease asked for (spec's is >= kiln's least)
};
// Issues name the field ("body.timeout"); features kiln lacks (volumes,
// mcp, iam, a filesystem-only pause) are refused as not_supported naming them.
// `lease`: kiln's lease bounds (SandboxManager::lease_seconds()); E2B's
// timeouts run from 1 to its max.
CreateRequest ReadCreate(const nlohmann::json& body,
                         const contract::IntField& lease = contract::kTimeoutSeconds);

// POST /sandboxes/{id}/connect, /v2/.../connect and /resume: {timeout?, memory?, autoPause?}.
struct ConnectRequest {
  std::optional<int> timeout_seconds;
  std::optional<bool> auto_pause;
  bool reboot = false;  // memory false (on_resume "reboot"): boot afresh from the files
};
ConnectRequest ReadConnect(const nlohmann::json& body,
                           const contract::IntField& lease = contract::kTimeoutSeconds);
// POST /sandboxes/{id}/timeout: {timeout} seconds, 1..lease.max.
int ReadTimeout(const nlohmann::json& body,
                const contract::IntField& lease = contract::kTimeoutSeconds);
// POST /sandboxes/{id}/refreshes: {duration?} seconds (default 60).
int ReadRefresh(const nlohmann::json& body);
// POST /sandboxes/{id}/pause: {memory?, requireHealthyGuest?}; memory false
// (mode "filesystem") keeps the files only. Returns memory as given.
std::optional<bool> ReadPause(const nlohmann::json& body);
// POST /sandboxes/{id}/fork: {timeout?, count?}.
struct ForkRequest {
  std::optional<int> timeout;  // seconds; the copies' lease (nullopt: the source's)
  int count = 1;
};
ForkRequest ReadFork(const nlohmann::json& body,
                     const contract::IntField& lease = contract::kTimeoutSeconds);
// PUT /sandboxes/{id}/network: {allowOut?, denyOut?, allow_internet_access?},
// the whole egress configuration (what is left out is cleared: an empty
// body allows the internet, as E2B's default), onto kiln's rules as a
// create's network is (allowOut beside a partial denyOut, and E2B's
// proxies, rules and DNS servers, refused by name).
network::Policy ReadNetworkUpdate(const nlohmann::json& body);
// POST /sandboxes/{id}/snapshots: {name?, memory?} (memory false: a disk snapshot).
control::SnapshotOptions ReadSnapshot(const nlohmann::json& body);

// GET /sandboxes and /v2/sandboxes, the query read.
struct ListQuery {
  std::vector<std::pair<std::string, std::string>> metadata;  // all must match
  bool running = true, paused = true;                         // the states asked for
  std::optional<int64_t> started_after_ms;
  std::optional<std::string> template_id;
  bool descending = true;  // E2B lists the newest first
  int limit = kDefaultPageSize;
  size_t offset = 0;  // from nextToken
};
// `get(name)` is the query parameter `name`, decoded once.
ListQuery ReadListQuery(const std::function<std::optional<std::string>(const std::string&)>& get);
// The x-next-token for the page after `offset` + `count`.
std::string NextToken(size_t next_offset);
// E2B's metadata filter, "k=v&k2=v2" with keys and values percent-encoded
// (the SDKs encode them, then the pairs); issues name "query.metadata".
std::vector<std::pair<std::string, std::string>> ParseMetadataFilter(const std::string& text);

// GET /sandboxes/{id}/metrics?start=&end= (Unix seconds, both optional):
// the window in ms, from `created_ms` to `now_ms` when left out.
struct MetricsWindow {
  int64_t from_ms = 0, to_ms = 0;
};
MetricsWindow ReadMetricsWindow(
    const std::function<std::optional<std::string>(const std::string&)>& get, int64_t created_ms,
    int64_t now_ms);
// GET /sandboxes/metrics?sandbox_ids=a,b: 1 to kMaxPageSize ids.
std::vector<std::string> ReadMetricsSandboxIds(const std::optional<std::string>& ids);
// The points of GET /sandboxes/{id}/metrics: E2B collects every 5 s.
inline constexpr int64_t kMetricsSpanMs = 5000;

// E2B's state for kiln's: running (starting, running) or paused (pausing,
// paused, resuming); nullopt for a stopped one.
std::optional<std::string> E2bStateName(control::SandboxState state);

// What an answer needs beyond the record.
struct SandboxExtras {
  std::string template_id;  // the image's name ("base"), or the snapshot it started from
  std::string envd_access_token, traffic_access_token;
  int64_t now_ms = 0;
};
// Sandbox: created, connected, resumed.
nlohmann::json CreatedJson(const control::SandboxRecord& r, const SandboxExtras& x);
// ListedSandbox, and SandboxDetail (GET /sandboxes/{id}).
nlohmann::json ListedJson(const control::SandboxRecord& r, const SandboxExtras& x);
nlohmann::json DetailJson(const control::SandboxRecord& r, const SandboxExtras& x);
// SandboxMetric: a point of a sandbox's metrics.
nlohmann::json SandboxMetricJson(const control::MetricSample& m);
// A Template (GET /templates), from kiln's image record.
nlohmann::json TemplateJson(const images::ImageRecord& image);
// SnapshotInfo: {snapshotID, names}.
nlohmann::json SnapshotInfoJson(const store::SnapshotRecord& r);

// The refusal of an E2B feature kiln does not offer, naming it and why:
// not_supported (501) with details {feature}; an unknown path is 404.
Status Unsupported(const std::string& method, const std::string& path);

// The sandbox's template as E2B shows it (routes.cc).
std::string TemplateIdOf(ApiContext& ctx, const control::SandboxRecord& r);
SandboxExtras ExtrasOf(ApiContext& ctx, const control::SandboxRecord& r);
// The later of Prefer: wait and now + kRoomWait.
control::Deadline CreateDeadline(const Exchange& ex);

// The interpreter port (interpreter_port.cc): E2B's /execute line for one
// of kiln's interpreter events ({"k": "stdout", "text"}, ...); null for an
// event E2B's stream has no line for. `now_ns`: the line's timestamp.
nlohmann::json ExecuteLine(const nlohmann::json& event, int64_t now_ns);
// A result: kiln's MIME bundle in E2B's keys (text, html, png, ...; other
// types under `extra`), with is_main_result.
nlohmann::json ResultLine(bool main, const nlohmann::json& data);

// templates, snapshots (routes_templates.cc).
void AddTemplateRoutes(Router& r, ApiContext& ctx);

}  // namespace kiln::api::e2b
