// kiln's own front: its requests, read. Each route's body, and each query
// or path parameter with a rule, becomes a typed request here, every
// problem named by its field ("body.vcpu", "query.cursor") and thrown as
// one ApiError (api/validate.h). A handler then reads one request, calls
// one service and renders the answer (presenters.h).
//
// requests.cc: members several bodies share, sandboxes, snapshots and
// forks, network, keys, previews, usage; requests_io.cc: exec, processes,
// files, watches, the interpreter, the terminal; requests_images.cc: image
// builds, tags, registries, build contexts.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/http_server.h"
#include "api/validate.h"
#include "common/path_ids.h"
#include "control/sandbox_manager.h"
#include "images/manager/image_request.h"
#include "interpreter/interpreter.h"
#include "io/types.h"
#include "network/policy.h"
#include "store/image_catalog.h"

namespace kiln::api::v1 {

// ---- Members several bodies share ----

// A `network` body member (create, fork, an image build) as egress rules;
// issues go to `f`.
std::optional<network::Policy> ReadNetworkField(FieldReader& f);
// A `labels` body member (create, snapshot, fork, an image build) within
// the contract's bounds.
std::optional<std::map<std::string, std::string>> ReadLabels(FieldReader& f);
// A sandbox name's characters ([A-Za-z0-9._-]+; the length is the caller's).
bool ValidSandboxName(const std::string& name);
// A `:pool` body (a snapshot's, an image's): `{"size": N}` pins the pool
// (returned), `{"auto": true}` gives it back to demand (nullopt).
std::optional<int> ReadPool(const nlohmann::json& body);
// A port as the API takes it: digits only, 1-65535.
std::optional<int> ParsePort(std::string_view text);
// The {port} path parameter; 400 naming path.port otherwise.
int ReadPortParam(Exchange& ex);

// ---- Sandboxes ----

// POST /v1/sandboxes: the spec, and the fields that steer the route.
struct CreateRequest {
  control::SandboxSpec spec;  // owner is the route's to fill
  std::optional<std::string> image;
  bool get_or_create = false;
  std::optional<int64_t> cpu_floor_millis;  // must be kilnd's price (the route checks)
};
// Volumes are refused as not_supported, naming body.volumes.
CreateRequest ReadCreate(const nlohmann::json& body,
                         const contract::IntField& lease = contract::kTimeoutSeconds);
// :extend, {seconds}: the seconds to add.
int ReadExtend(const nlohmann::json& body);
// :update: the members given; null removes a name, an env entry or the
// total cost cap.
control::SandboxUpdate ReadUpdate(const nlohmann::json& body);
// :pause, {memory?}: false keeps only the files (its wake boots afresh);
// nullopt is the sandbox's pauseMemory.
std::optional<bool> ReadPauseMemory(const nlohmann::json& body);
// :wake, {timeoutSeconds?}: the new lease, or nullopt to keep the sandbox's.
std::optional<int> ReadWake(const nlohmann::json& body,
                            const contract::IntField& lease = contract::kTimeoutSeconds);
// GET /v1/sandboxes: state, name, label, includeStopped, limit, cursor
// (the owner is the route's to fill).
struct SandboxListQuery {
  control::ListFilter filter;
  int limit = 100;
  size_t start = 0;  // from the cursor
};
SandboxListQuery ReadSandboxList(Exchange& ex);

// GET /v1/sandboxes/{id}/metrics?range=15m|1h|6h|24h|7d|30d (default 15m):
// how far back, in points of what span.
struct MetricsRange {
  int64_t back_ms = 15 * 60 * 1000;
  int64_t span_ms = 10 * 1000;
};
MetricsRange ReadMetricsRange(Exchange& ex);

// ---- Snapshots and forks ----

// :snapshot, {name?, labels?, retentionDays?, mode?}.
control::SnapshotOptions ReadSnapshot(const nlohmann::json& body);
// :fork, {count?, labels?, keepSnapshot?, name?, network?}.
control::ForkOptions ReadFork(const nlohmann::json& body);

// ---- Network ----

// PUT /v1/sandboxes/{id}/network: the whole policy (internet is required).
network::Policy ReadNetworkPut(const nlohmann::json& body);
// GET .../network/log: a page of at most `limit` entries after `after`.
struct EgressLogQuery {
  int limit = 100;
  int64_t after = 0;  // from the cursor
};
EgressLogQuery ReadEgressLogQuery(Exchange& ex);

// ---- Exec and processes (requests_io.cc) ----

// POST /v1/sandboxes/{id}:exec. `s` is the sandbox run in: its user is one
// a command may ask for.
struct ExecRequest {
  io::Command command;
  io::ExecOptions options;
  bool stream = false;  // NDJSON events, else one CommandResult
  bool base64 = false;  // outputEncoding base64
};
ExecRequest ReadExec(const nlohmann::json& body, const control::Sandbox& s);
// POST .../processes.
io::ProcessSpec ReadProcessStart(const nlohmann::json& body, const control::Sandbox& s);
// POST .../processes/{pid}:write, {data | base64, eof?, offset?}.
struct StdinWrite {
  std::string bytes;
  bool eof = false;
  // Where `bytes` start in the process's stdin, as the caller counts.
  std::optional<int64_t> offset;
};
StdinWrite ReadStdinWrite(const nlohmann::json& body);
// POST .../processes/{pid}:signal, {signal?}: one of the signals offered.
std::string ReadSignal(const nlohmann::json& body);
// POST .../processes/{pid}:resize, {cols, rows}.
io::TerminalSize ReadResize(const nlohmann::json& body);
// A poll of output or events: cursor, waitMs (within `wait_ms`), follow.
// `loose_follow` takes "True" and "1" for true too (the reference's watch
// clients send them).
struct FollowQuery {
  uint64_t cursor = 0;
  int64_t wait_ms = 0;
  bool follow = false;
};
FollowQuery ReadFollowQuery(Exchange& ex, const contract::IntField& wait_ms, bool loose_follow);

// ---- Files (requests_io.cc) ----

// PUT .../files/content?mode=: an octal mode, 0644 when absent.
int ReadFileMode(Exchange& ex);
// GET .../files/list: path, glob, hidden, limit, depth.
struct FileListQuery {
  std::string path;
  std::optional<std::string> glob;  // relative to path, "./" dropped
  bool hidden = true;
  std::optional<int64_t> limit;
  int levels = 1;  // depth, else as deep as the glob reaches
};
FileListQuery ReadFileList(Exchange& ex);
// files:mkdir, files:remove, files:rename.
struct MkdirRequest {
  std::string path;
  bool parents = true;
};
MkdirRequest ReadMkdir(const nlohmann::json& body);
struct RemoveRequest {
  std::string path;
  bool recursive = false;
};
RemoveRequest ReadRemove(const nlohmann::json& body);
struct RenameRequest {
  std::string from, to;
  bool overwrite = false;
};
RenameRequest ReadRename(const nlohmann::json& body);

// ---- Watches, the interpreter, the terminal (requests_io.cc) ----

// POST .../files/watches; a watch named by no id gets a new one.
io::WatchSpec ReadWatch(const nlohmann::json& body);
// POST .../interpreter:run.
struct InterpreterRun {
  interpreter::RunRequest run;
  bool stream = false;
};
InterpreterRun ReadInterpreterRun(const nlohmann::json& body);
// POST .../interpreter/contexts.
interpreter::ContextSpec ReadContextSpec(const nlohmann::json& body);
// The {c} parameter: a context id; a malformed one cannot exist (404
// context_not_found).
std::string ReadContextParam(Exchange& ex);
// GET .../terminal's query: a size, and either the process to attach to or
// the command and cwd of a new one.
struct TerminalQuery {
  std::optional<io::TerminalSize> size;
  std::optional<std::string> process_id;
  std::optional<std::string> command;  // a non-empty one
  std::optional<std::string> cwd;
};
TerminalQuery ReadTerminalQuery(Exchange& ex);

// ---- Images (requests_images.cc) ----

// A build context's most, compressed (the reference's).
inline constexpr uint64_t kMaxContextBytes = 100ull << 20;
// A context named as Runtime's client names it: the gzipped tar's chunks,
// each uploaded on its own (PUT /v1/images/context/{hex}), in order.
struct ChunkedContext {
  Sha256Digest archive;
  uint64_t size = 0;
  std::vector<Sha256Digest> chunks;
};
// POST /v1/images. Throws ApiError (400 naming each field, 413 for a
// Dockerfile over 256 KiB). A chunked `context` goes to `chunked`
// (req.context stays empty until the chunks are joined).
images::ImageRequest ReadImageRequest(const nlohmann::json& body, const std::string& owner,
                                      std::optional<ChunkedContext>* chunked);
// A `start` object (of a build, of a recipe), its issues under `prefix`.
std::optional<images::StartSpec> ReadStart(const nlohmann::json* raw, const std::string& prefix);
// :tag and :untag, {tag}.
std::string ReadTag(const nlohmann::json& body);
// POST /v1/images/registries: {registry (host[:port]), username, password}.
store::RegistryCredential ReadRegistry(const nlohmann::json& body);
// POST /v1/images/registries:delete, {registry}.
std::string ReadRegistryDelete(const nlohmann::json& body);
// POST /v1/images/context/missing, {digests}: each as parsed, and as the
// caller spelled it (the answer uses the caller's spelling).
struct DigestsAsked {
  std::vector<Sha256Digest> digests;
  std::map<Sha256Digest, std::string> spelled;
};
DigestsAsked ReadDigestsAsked(const nlohmann::json& body);
// PUT /v1/images/context/...: the {digest} path parameter, the body's
// sha256 (hex alone for a chunk, sha256:<hex> for a whole context).
Sha256Digest ReadContextDigest(Exchange& ex, bool chunk);
// GET /v1/images/{id}/logs: after, limit, follow.
struct ImageLogQuery {
  int64_t after = 0;
  int64_t limit = 1000;
  bool follow = false;
};
ImageLogQuery ReadImageLogQuery(Exchange& ex);

// ---- Keys, previews, usage (requests.cc) ----

// POST /v1/keys, {name?, dailyLimitMicros?, admin?}.
struct KeyRequest {
  std::string name;
  std::optional<int64_t> daily_limit_micros;
  bool admin = false;
};
KeyRequest ReadKey(const nlohmann::json& body);
// POST .../previews, {port, visibility?, ttlSeconds?, expiresAt?}.
struct PreviewRequest {
  int port = 0;
  bool is_public = false;
  int64_t ttl_ms = 0;  // ttlSeconds, else a day
  std::optional<int64_t> ttl_s;
  std::optional<std::string> expires_at;
};
PreviewRequest ReadPreview(const nlohmann::json& body);
// A token's expiry from ttlSeconds and expiresAt (the earlier bound wins);
// issues are named under `where` ("body", "query").
std::optional<int64_t> ReadPreviewExpiry(std::optional<int64_t> ttl_s,
                                         const std::optional<std::string>& expires_at,
                                         const std::string& where);
// GET .../previews/{port}: ttlSeconds and expiresAt of the token shown.
std::optional<int64_t> ReadPreviewExpiryQuery(Exchange& ex);
// GET /v1/usage: groupBy ("", "key" or "label:NAME"; groupBy=label takes
// label=NAME).
std::string ReadUsageGroupBy(Exchange& ex);
// GET /v1/usage: from and to (the last 30 days up to `now` by default),
// and bucketSeconds, within 500 buckets.
struct UsageSpan {
  int64_t from = 0, to = 0;
  std::optional<int64_t> bucket_ms;
};
UsageSpan ReadUsageSpan(Exchange& ex, int64_t now_ms);

}  // namespace kiln::api::v1
