// Metering: what each running or paused sandbox costs, priced every meter
// interval; stored snapshots are priced by the catalogue
// (SnapshotCatalogue::MeterStorage). The rows go to the UsageLedger.
#include <algorithm>

#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "control/sandbox_manager.h"

namespace kiln::control {

using nlohmann::json;

namespace {
constexpr int64_t kKeepRecordsMs = 30 * 86400000LL;  // stopped records in the table

// The meter's reading as a point of the sandbox's metrics: `cpu_ns` used
// over `wall_ms`.
MetricSample Sample(const Sandbox& s, const engine::Usage& usage,
                    const engine::StorageUsage& storage, uint64_t cpu_ns, int64_t wall_ms,
                    int64_t now_ms) {
  const Shape& shape = s.spec().shape;
  MetricSample m;
  m.at_ms = now_ms;
  m.cpu_cores = shape.vcpu;
  if (wall_ms > 0 && shape.vcpu > 0)
    m.cpu_percent = std::min(
        100.0, static_cast<double>(cpu_ns) / 1e4 / static_cast<double>(wall_ms * shape.vcpu));
  m.memory_bytes = usage.memory_bytes;
  m.memory_cache_bytes = storage.memory_cache_bytes;
  m.memory_limit_bytes = static_cast<uint64_t>(shape.memory_mib) << 20;
  m.disk_bytes = storage.disk_bytes;
  m.disk_limit_bytes = static_cast<uint64_t>(shape.disk_mib) << 20;
  return m;
}
}  // namespace

store::UsageRow SandboxManager::MeterOne(Sandbox& s, int64_t now_ms) {
  std::lock_guard lock(meter_mu_);
  Meter m = s.meter();
  engine::Usage usage = engine_.GetUsage(s.id());
  uint64_t cpu_now = usage.cpu_ns;
  // A zero reading means the cgroup is gone; charge no CPU for it.
  uint64_t cpu = cpu_now >= m.cpu_ns ? cpu_now - m.cpu_ns : 0;
  int64_t wall = std::max<int64_t>(0, now_ms - m.at_ms);
  if (cpu_now > 0)
    s.AddMetricSample(Sample(s, usage, engine_.GetStorageUsage(s.id()), cpu, wall, now_ms));
  UsageDelta d = MeterInterval(options_.prices, s.spec().shape, cpu, wall);
  metrics::Inc("kiln_metered_cpu_seconds_total", {}, d.cpu_seconds);
  metrics::Inc("kiln_key_cpu_seconds_total", {{"key", s.spec().owner}}, d.cpu_seconds);
  store::UsageRow row;
  row.sandbox_id = s.id();
  row.key_id = s.spec().owner;
  row.labels = s.spec().labels;
  row.start_ms = m.at_ms;
  row.end_ms = now_ms;
  row.cpu_seconds = d.cpu_seconds;
  row.gib_hours = d.gib_hours;
  row.micros = d.micros_exact;
  if (cpu_now >= m.cpu_ns) m.cpu_ns = cpu_now;
  m.at_ms = now_ms;
  m.cpu_seconds += d.cpu_seconds;
  m.gib_hours += d.gib_hours;
  m.micros += d.micros_exact;
  s.SetMeter(m);
  return row;
}

store::UsageRow SandboxManager::MeterPaused(Sandbox& s, int64_t now_ms) {
  std::lock_guard lock(meter_mu_);
  SandboxRecord r = s.Record();
  store::UsageRow row;
  row.sandbox_id = s.id();
  row.key_id = s.spec().owner;
  row.labels = s.spec().labels;
  auto snap = snapshots_.Get(r.checkpoint);
  int64_t since = catalogue_.TakeMeteredSince(r.checkpoint, now_ms);
  row.start_ms = since;
  row.end_ms = now_ms;
  if (snap) {
    row.gb_months = SnapshotGbMonths(snap->size_bytes, now_ms - since);
    row.micros = SnapshotStorageMicrosExact(options_.prices, snap->size_bytes, now_ms - since);
  }
  Meter m = r.meter;
  m.micros += row.micros;
  s.SetMeter(m);
  return row;
}

void SandboxManager::MeterAll(bool flush_all) {
  int64_t now = StableNowMs();
  std::vector<json> records;
  for (auto& s : List(ListFilter{{SandboxState::kRunning}})) {
    ledger_.Accumulate(MeterOne(*s, now));
    records.push_back(s->Record());
  }
  // A paused sandbox pays for its checkpoint's bytes, as a snapshot would.
  for (auto& s : List(ListFilter{{SandboxState::kPaused}})) {
    ledger_.Accumulate(MeterPaused(*s, now));
    records.push_back(s->Record());
  }
  for (const auto& row : catalogue_.MeterStorage(now, options_.prices)) ledger_.Accumulate(row);
  if (flush_all)
    ledger_.FlushAll();
  else
    ledger_.FlushDue(now);
  try {
    records_.Put(records);
  } catch (const std::exception& e) {
    LogError("cannot record sandboxes", {{"error", e.what()}});
  }
}

void SandboxManager::MeterLoop(std::stop_token stop) {
  std::unique_lock lock(mu_);
  int64_t last_prune = 0;
  while (!stop.stop_requested()) {
    cv_.wait_for(lock, stop, std::chrono::milliseconds(options_.meter_interval_ms),
                 [] { return false; });
    if (stop.stop_requested()) break;
    lock.unlock();
    MeterAll();
    int64_t now = StableNowMs();
    if (now - last_prune > 3600 * 1000) {
      last_prune = now;
      try {
        records_.DeleteStoppedBefore(now - kKeepRecordsMs);
      } catch (const std::exception& e) {
        LogError("cannot prune records", {{"error", e.what()}});
      }
    }
    lock.lock();
  }
}

}  // namespace kiln::control
