#include "api/kiln/presenters.h"

#include "api/utf8.h"
#include "common/time.h"

namespace kiln::api {

using nlohmann::json;

namespace {
json TimeOrNull(int64_t ms) { return ms ? json(FormatTime(ms)) : json(nullptr); }

// The reference's coarse `status` beside the fine `state`.
std::string_view CoarseStatus(control::SandboxState state) {
  switch (state) {
    case control::SandboxState::kStarting:
      return "pending";
    case control::SandboxState::kRunning:
    case control::SandboxState::kPausing:
      return "active";
    case control::SandboxState::kPaused:
    case control::SandboxState::kResuming:
      return "paused";
    case control::SandboxState::kStopping:
      return "stopping";
    case control::SandboxState::kStopped:
      return "stopped";
  }
  return "stopped";
}
template <typename T>
json OrNull(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}
}  // namespace

json SandboxJson(const control::SandboxRecord& r) {
  const control::SandboxSpec& spec = r.spec;
  json env_names = json::array();
  for (const auto& [k, v] : spec.env) env_names.push_back(k);
  return json{{"id", r.id},
              {"kind", "sandbox"},
              {"name", spec.name ? json(*spec.name) : json(nullptr)},
              {"labels", spec.labels},
              {"state", control::StateName(r.state)},
              // One host, no trial: every sandbox is metered and charged alike.
              {"funding", "paid"},
              {"region", "local"},
              {"vcpu", spec.shape.vcpu},
              {"memoryMiB", spec.shape.memory_mib},
              {"diskMiB", spec.shape.disk_mib},
              {"timeoutSeconds", spec.timeout_seconds},
              {"onLeaseEnd", spec.pause_on_lease_end    ? "pause"
                             : spec.delete_on_lease_end ? "delete"
                                                        : "stop"},
              {"pausable", spec.pausable},
              {"idlePauseSeconds", spec.idle_pause_seconds},
              {"autoWake", spec.auto_wake},
              {"persistent", spec.persistent},
              {"sudo", spec.sudo},
              {"maxTotalCostMicros", OrNull(spec.max_total_cost_micros)},
              {"pausedAt", TimeOrNull(r.paused_ms)},
              {"pausedExpiresAt", TimeOrNull(r.paused_expires_ms)},
              {"status", CoarseStatus(r.state)},
              {"maxCostMicros", spec.max_cost_micros ? json(*spec.max_cost_micros) : json(nullptr)},
              {"chargedMicros", static_cast<int64_t>(r.meter.micros)},
              {"cpuSeconds", r.meter.cpu_seconds},
              {"createdAt", FormatTime(r.created_ms)},
              {"readyAt", TimeOrNull(r.ready_ms)},
              {"expiresAt", FormatTime(r.expires_ms)},
              {"endedAt", TimeOrNull(r.ended_ms)},
              {"stopReason", r.stop_reason.empty() ? json(nullptr) : json(r.stop_reason)},
              {"envNames", env_names},
              {"image", spec.image ? json(*spec.image) : json(nullptr)},
              {"network", r.network.ToJson()}};
}

json DeletedSandboxJson(const control::DeletedSandbox& d) {
  const control::SandboxRecord& r = d.record;
  return json{{"id", r.id},
              {"kind", "sandbox"},
              {"name", r.spec.name ? json(*r.spec.name) : json(nullptr)},
              {"labels", r.spec.labels},
              {"status", "deleted"},
              {"state", control::StateName(r.state)},
              {"deletedAt", FormatTime(d.deleted_ms)},
              {"endedAt", TimeOrNull(r.ended_ms)},
              {"chargedMicros", static_cast<int64_t>(r.meter.micros)}};
}

json NetworkPolicyJson(const control::SandboxRecord& r) {
  json j = r.network.ToJson();
  j["sandboxId"] = r.id;
  j["version"] = r.network_version;
  // Rules are applied before PUT answers, so what is enforced is what is set.
  j["enforced"] = true;
  j["enforcedVersion"] = r.network_version;
  j["updatedAt"] = FormatTime(r.network_updated_ms);
  return j;
}

namespace {
json SnapshotFields(const store::SnapshotRecord& r) {
  json out{
      {"id", r.id},
      {"kind", "snapshot"},
      {"mode", store::SnapshotModeName(r.mode)},
      {"name", r.name ? json(*r.name) : json(nullptr)},
      {"labels", r.labels},
      {"state", "ready"},
      {"status", "ready"},
      {"sourceSandboxId", r.source_sandbox_id},
      {"shape",
       {{"vcpu", r.shape.vcpu}, {"memoryMiB", r.shape.memory_mib}, {"diskMiB", r.shape.disk_mib}}},
      {"retentionDays", r.retention_days},
      {"sizeBytes", r.size_bytes},
      {"network", r.network.is_null() ? json(nullptr) : r.network},
      {"storedBytes", r.size_bytes},
      {"captureMs", r.capture_ms},
      {"createdAt", FormatTime(r.created_ms)},
      {"readyAt", FormatTime(r.created_ms)},
      {"expiresAt", FormatTime(r.expires_ms)}};
  // An imported snapshot's provenance: the id it came with (when another
  // key's held it here) and the image it ran on the sending host.
  if (r.source_id) out["sourceId"] = *r.source_id;
  if (r.source_image) out["sourceImage"] = *r.source_image;
  return out;
}
}  // namespace

json PoolJson(const control::PoolStatus& pool) {
  return json{{"size", pool.size},
              {"ready", pool.ready},
              {"memoryBytes", pool.memory_bytes},
              {"mode", pool.pinned ? "pinned" : "auto"},
              {"wanted", pool.wanted},
              {"unfilledReason",
               pool.unfilled_reason.empty() ? json(nullptr) : json(pool.unfilled_reason)}};
}

json PoolBudgetJson(const control::WarmPoolOptions& o) {
  return json{{"adaptive", o.adaptive},
              {"memoryBudgetBytes", o.adaptive ? o.sizer.budget_bytes : 0}};
}

json SnapshotJson(const store::SnapshotRecord& r, const control::PoolStatus& pool) {
  json out = SnapshotFields(r);
  out["pool"] = PoolJson(pool);
  return out;
}

json DeletedSnapshotJson(const store::SnapshotRecord& r, int64_t deleted_ms) {
  json out = SnapshotFields(r);
  out["state"] = "deleted";
  out["status"] = "deleted";
  out["deletedAt"] = FormatTime(deleted_ms);
  return out;
}

json ImageJson(const images::ImageRecord& r, const control::PoolStatus& warm_pool) {
  json pool = PoolJson(warm_pool);
  return json{{"id", r.id},
              {"kind", "image"},
              {"name", r.name == r.id ? json(nullptr) : json(r.name)},  // unnamed
              {"version", r.version},
              {"tags", r.tags},
              {"labels", r.labels},
              {"state", images::ImageStateName(r.state)},
              {"source", images::SourceName(r.source)},
              {"ref", OrNull(r.ref)},
              {"digest", OrNull(r.digest)},
              {"sizeBytes", r.size_bytes},
              {"layers", r.layers.size()},
              {"stepsTotal", r.steps_total},
              {"stepsCached", r.steps_cached},
              {"stepsRun", r.steps_run.value_or(0)},
              {"config", r.config ? images::ConfigJson(*r.config) : json(nullptr)},
              {"start", r.start ? images::StartJson(*r.start) : json(nullptr)},
              {"sudo", r.sudo},
              {"build", r.build ? images::BuildJson(*r.build) : json(nullptr)},
              {"pool", pool},
              {"warm", r.warm_snapshot.has_value()},
              {"error", r.error},
              {"createdAt", TimeOrNull(r.created_ms)},
              {"readyAt", TimeOrNull(r.ready_ms)},
              {"endedAt", TimeOrNull(r.ended_ms)}};
}

json FileEntryJson(const io::FileEntry& e) {
  json j{{"name", e.name}, {"path", e.path}, {"type", io::TypeName(e.type)},
         {"size", e.size}, {"mode", e.mode}, {"modifiedAt", FormatTime(e.modified_ms)},
         {"uid", e.uid},   {"gid", e.gid}};
  if (e.symlink_target) j["symlinkTarget"] = *e.symlink_target;
  return j;
}

json FileStatJson(const io::FileStat& stat) {
  json j = stat.exists ? FileEntryJson(stat.entry) : json{{"path", stat.entry.path}};
  j["exists"] = stat.exists;
  return j;
}

json ProcessJson(const io::ProcessInfo& p) {
  return json{{"id", p.id},
              {"kind", "process"},
              {"pid", p.pid},
              {"state", io::StateName(p.state)},
              {"exitCode", OrNull(p.exit_code)},
              {"signal", OrNull(p.signal)},
              {"command", p.command},
              {"argv", p.argv},
              {"cwd", p.cwd},
              {"stdinOpen", p.stdin_open},
              {"stdinOffset", p.stdin_offset},
              {"timeoutMs", p.timeout_ms},
              {"startedAt", FormatTime(p.started_ms)},
              {"endedAt", p.ended_ms ? json(FormatTime(*p.ended_ms)) : json(nullptr)},
              {"outputBytes", p.output_bytes},
              {"firstOffset", p.first_offset},
              {"pty", p.pty ? json{{"cols", p.pty->cols}, {"rows", p.pty->rows}} : json(nullptr)}};
}

json OutputPageJson(const io::OutputPage& page) {
  json chunks = json::array();
  for (const auto& c : page.chunks)
    chunks.push_back(json{{"offset", c.offset},
                          {"stream", io::StreamName(c.stream)},
                          {"data", SanitizeUtf8(c.data)}});
  return json{{"chunks", chunks},
              {"nextCursor", page.next_cursor},
              {"firstOffset", page.first_offset},
              {"droppedBytes", page.dropped_bytes},
              {"complete", page.complete},
              {"state", io::StateName(page.process.state)}};
}

json ApiKeyJson(const store::ApiKey& k) {
  return json{
      {"id", k.id},
      {"name", k.name},
      {"admin", k.admin},
      {"dailyLimitMicros", k.daily_limit_micros ? json(*k.daily_limit_micros) : json(nullptr)},
      {"createdAt", FormatTime(k.created_ms)},
      {"revokedAt", k.revoked_ms ? json(FormatTime(*k.revoked_ms)) : json(nullptr)}};
}

json WatchJson(const io::WatchInfo& w) {
  const io::WatchSpec& spec = w.spec;
  return json{{"id", spec.id},
              {"path", spec.path},
              {"recursive", spec.recursive},
              {"events", spec.events},
              {"include", spec.include},
              {"exclude", spec.exclude},
              {"batchMs", spec.batch_ms},
              {"timeoutMs", spec.timeout_ms},
              {"maxWatches", spec.max_watches},
              {"watchedDirs", w.watched},
              {"cursor", w.cursor},
              {"firstCursor", w.first_cursor},
              {"state", w.running ? "running" : "ended"},
              {"endReason", w.end_reason ? json(*w.end_reason) : json(nullptr)},
              {"startedAt", FormatTime(w.started_ms)},
              {"endedAt", w.ended_ms ? json(FormatTime(*w.ended_ms)) : json(nullptr)}};
}

json WatchEventJson(const io::WatchEvent& e) {
  json j{{"type", e.type}, {"path", e.path}, {"isDir", e.is_dir}};
  if (e.old_path) j["oldPath"] = *e.old_path;
  if (e.count > 1) j["count"] = e.count;
  return j;
}

json WatchNoticeJson(const io::WatchNotice& n) {
  json j{{"k", n.kind}};
  if (n.kind == "overflow") {
    j["dropped"] = n.dropped;
    j["reason"] = n.reason;
  } else if (n.kind == "limit") {
    j["watches"] = n.watches;
  } else if (!n.reason.empty()) {
    j["reason"] = n.reason;
  }
  return j;
}

}  // namespace kiln::api
