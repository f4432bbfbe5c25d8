// kiln's presenters (presenters.h): lists, sandboxes, snapshots and pools,
// network, keys, previews, the host.
#include "api/kiln/presenters.h"

#include <algorithm>

#include "common/time.h"

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

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

}  // namespace

json TimeOrNull(int64_t ms) { return ms ? json(FormatTime(ms)) : json(nullptr); }

json ListJson(json data) { return json{{"data", std::move(data)}}; }

json PageJson(json data, const std::optional<std::string>& next_cursor) {
  return json{{"data", std::move(data)}, {"nextCursor", OrNull(next_cursor)}};
}

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
              {"pauseMemory", spec.pause_memory},
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

namespace {

json MetricSampleJson(const control::MetricSample& m) {
  return {{"at", TimeOrNull(m.at_ms)},
          {"cpuPercent", m.cpu_percent},
          {"cpuCores", m.cpu_cores},
          {"memoryBytes", m.memory_bytes},
          {"memoryCacheBytes", m.memory_cache_bytes},
          {"memoryLimitBytes", m.memory_limit_bytes},
          {"diskBytes", m.disk_bytes},
          {"diskLimitBytes", m.disk_limit_bytes}};
}

}  // namespace

json SandboxMetricsJson(const std::optional<control::MetricSample>& latest,
                        const std::vector<control::MetricPoint>& points) {
  json out = json::array();
  for (const auto& p : points) {
    json j = MetricSampleJson(p.mean);
    j["cpuPeakPercent"] = p.cpu_peak_percent;
    j["memoryPeakBytes"] = p.memory_peak_bytes;
    j["samples"] = p.samples;
    out.push_back(std::move(j));
  }
  return {{"latest", latest ? MetricSampleJson(*latest) : json(nullptr)},
          {"points", std::move(out)}};
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

json SandboxesJson(const std::vector<std::shared_ptr<control::Sandbox>>& sandboxes) {
  json list = json::array();
  for (const auto& s : sandboxes) list.push_back(SandboxJson(*s));
  return list;
}

json LaunchedJson(const launch::Launched& launched) {
  json answer = SandboxJson(*launched.sandbox);
  answer["reused"] = launched.reused;
  if (!launched.start.is_null()) answer["start"] = launched.start;
  return answer;
}

json ForkJson(json copies, json kept_snapshot) {
  json answer{{"sandboxes", std::move(copies)}};
  if (!kept_snapshot.is_null()) answer["snapshot"] = std::move(kept_snapshot);
  return answer;
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

json EgressEntryJson(const store::EgressEntry& e) {
  return json{{"id", std::to_string(e.seq)},
              {"time", FormatTime(e.start_ms)},
              {"method", e.method},
              {"host", e.host},
              {"address", e.address.empty() ? json(nullptr) : json(e.address)},
              {"port", e.port},
              {"verdict", e.verdict},
              {"bytesOut", e.bytes_out},
              {"bytesIn", e.bytes_in},
              {"durationMs", e.duration_ms},
              {"open", e.open},
              {"closedBy", e.closed_by.empty() ? json(nullptr) : json(e.closed_by)}};
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

json ApiKeyJson(const store::ApiKey& k) {
  return json{
      {"id", k.id},
      {"name", k.name},
      {"admin", k.admin},
      {"dailyLimitMicros", k.daily_limit_micros ? json(*k.daily_limit_micros) : json(nullptr)},
      {"createdAt", FormatTime(k.created_ms)},
      {"revokedAt", k.revoked_ms ? json(FormatTime(*k.revoked_ms)) : json(nullptr)}};
}

json NewApiKeyJson(const store::ApiKey& key, const std::string& secret) {
  json out = ApiKeyJson(key);
  out["secret"] = secret;
  return out;
}

json PreviewJson(const PortSettings& ports, const store::PreviewRecord& p,
                 std::optional<int64_t> expiry_ms) {
  std::string url = PreviewUrl(ports, p.sandbox_id, p.port);
  json j = {{"id", p.id},
            {"sandboxId", p.sandbox_id},
            {"port", p.port},
            {"visibility", p.is_public ? "public" : "private"},
            {"url", url},
            {"token", nullptr},
            {"tokenExpiresAt", nullptr},
            {"urlWithToken", url},
            {"disabled", false},
            {"embedOrigins", json::array()},
            {"createdAt", FormatTime(p.created_ms)}};
  if (!p.is_public) {
    int64_t expiry = expiry_ms.value_or(NowMs() + p.ttl_ms);
    std::string token = control::Previews::Token(p, expiry);
    j["token"] = token;
    j["tokenExpiresAt"] = FormatTime(expiry);
    j["urlWithToken"] = url + "?" + kPreviewTokenQuery + "=" + token;
  }
  return j;
}

json DeletedPreviewJson(const store::PreviewRecord& p) {
  return json{{"id", p.id}, {"sandboxId", p.sandbox_id}, {"port", p.port}, {"deleted", true}};
}

json HealthJson(const control::EngineInfo& e, const control::WarmPoolOptions& pools) {
  return json{{"ok", true},
              {"version", KILN_VERSION},
              {"time", FormatTime(NowMs())},
              {"engine",
               {{"name", e.name},
                {"version", e.version},
                {"pinnedVersion", e.pinned_version},
                {"pinned", e.pinned()}}},
              {"pools", PoolBudgetJson(pools)}};
}

json LimitsJson(int64_t used_micros, std::optional<int64_t> limit_micros) {
  json daily = {{"limitMicros", nullptr},
                {"usedMicros", used_micros},
                {"remainingMicros", nullptr},
                {"window", "24h"}};
  if (limit_micros) {
    daily["limitMicros"] = *limit_micros;
    daily["remainingMicros"] = std::max<int64_t>(0, *limit_micros - used_micros);
  }
  return json{{"access", "full"}, {"daily", daily}, {"trial", nullptr}};
}

json CapacityJson(const control::Capacity::Stats& st, const control::CapacityLimits& lim,
                  json pools) {
  int64_t mem_budget = lim.memory_budget_mib();
  double vcpu_budget = lim.vcpu_budget();
  int64_t disk_budget = lim.disk_budget_mib();
  bool disk_counted = disk_budget != INT64_MAX;
  return json{
      {"running", st.running},
      {"queued", st.waiting},
      {"pooled", st.pooled},
      {"memoryMiB",
       {{"budget", mem_budget},
        {"reserved", st.reserved_memory_mib},
        {"free", std::max<int64_t>(0, mem_budget - st.reserved_memory_mib)}}},
      {"vcpus",
       {{"budget", vcpu_budget},
        {"reserved", st.reserved_vcpus},
        {"free", std::max(0.0, vcpu_budget - st.reserved_vcpus)}}},
      {"diskMiB",
       {{"budget", disk_counted ? json(disk_budget) : json(nullptr)},
        {"reserved", st.reserved_disk_mib},
        {"free", disk_counted ? json(std::max<int64_t>(0, disk_budget - st.reserved_disk_mib))
                              : json(nullptr)}}},
      {"pools", std::move(pools)}};
}

json CapacityPoolJson(const std::string& snapshot_id, const control::PoolStatus& pool) {
  return json{{"kind", "snapshot"},
              {"id", snapshot_id},
              {"size", pool.size},
              {"ready", pool.ready},
              {"memoryBytes", pool.memory_bytes}};
}

json UsageTotalsJson(const std::vector<store::UsageStore::Total>& totals) {
  json data = json::array();
  double cpu = 0, gib_hours = 0, gb_months = 0, micros = 0;
  for (const auto& t : totals) {
    data.push_back({{"group", t.group},
                    {"cpuSeconds", t.cpu_seconds},
                    {"gibHours", t.gib_hours},
                    {"gbMonths", t.gb_months},
                    {"costMicros", static_cast<int64_t>(t.micros + 0.5)},
                    {"sandboxes", t.sandboxes}});
    cpu += t.cpu_seconds;
    gib_hours += t.gib_hours;
    gb_months += t.gb_months;
    micros += t.micros;
  }
  json total = {{"cpuSeconds", cpu},
                {"gibHours", gib_hours},
                {"gbMonths", gb_months},
                {"costMicros", static_cast<int64_t>(micros + 0.5)}};
  return json{{"data", std::move(data)}, {"total", std::move(total)}};
}

json UsageJson(int64_t from_ms, int64_t to_ms, std::optional<int64_t> bucket_ms,
               const std::string& group_by, json prices, const json& totals, json buckets) {
  json answer{{"from", FormatTime(from_ms)},
              {"to", FormatTime(to_ms)},
              {"groupBy", group_by.empty() ? json(nullptr) : json(group_by)},
              {"unit", "micros"},
              {"prices", std::move(prices)},
              {"data", totals["data"]},
              {"total", totals["total"]}};
  if (bucket_ms) {
    answer["bucketSeconds"] = *bucket_ms / 1000;
    answer["buckets"] = std::move(buckets);
  }
  return answer;
}

json UsageBucketJson(int64_t from_ms, int64_t to_ms, const json& totals) {
  return json{{"from", FormatTime(from_ms)},
              {"to", FormatTime(to_ms)},
              {"data", totals["data"]},
              {"total", totals["total"]}};
}

}  // namespace kiln::api::v1
