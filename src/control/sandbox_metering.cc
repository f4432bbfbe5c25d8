// Metering: what each running sandbox and stored snapshot costs, priced
// every meter interval and written to the usage ledger in coarse rows.
#include <algorithm>

#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "control/sandbox_manager.h"

namespace kiln::control {

using nlohmann::json;

namespace {
// A ledger row covers up to 5 minutes of a sandbox: metered every 5 s, 1,000
// sandboxes would otherwise append 200 rows a second.
constexpr int64_t kLedgerRowMs = 5 * 60 * 1000;
constexpr int64_t kKeepRecordsMs = 30 * 86400000LL;  // stopped records in the table
}  // namespace

store::UsageRow SandboxManager::MeterOne(Sandbox& s, int64_t now_ms) {
  std::lock_guard lock(meter_mu_);
  Meter m = s.meter();
  uint64_t cpu_now = engine_.GetUsage(s.id()).cpu_ns;
  // A zero reading means the cgroup is gone; charge no CPU for it.
  uint64_t cpu = cpu_now >= m.cpu_ns ? cpu_now - m.cpu_ns : 0;
  int64_t wall = std::max<int64_t>(0, now_ms - m.at_ms);
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
  int64_t since = now_ms;
  {
    std::lock_guard lock2(mu_);
    auto it = snapshot_metered_ms_.find(r.checkpoint);
    if (it != snapshot_metered_ms_.end()) {
      since = std::min(it->second, now_ms);
      it->second = now_ms;
    }
  }
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

void SandboxManager::Accumulate(const store::UsageRow& row) {
  std::lock_guard lock(pending_mu_);
  auto [it, fresh] = pending_.try_emplace(row.sandbox_id, row);
  if (fresh) return;
  store::UsageRow& p = it->second;
  p.end_ms = row.end_ms;
  p.cpu_seconds += row.cpu_seconds;
  p.gib_hours += row.gib_hours;
  p.gb_months += row.gb_months;
  p.micros += row.micros;
}

void SandboxManager::Flush(int64_t now_ms, bool all, const std::string& only_id) {
  std::vector<store::UsageRow> due;
  {
    std::lock_guard lock(pending_mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      bool take = only_id.empty() ? (all || it->second.start_ms <= now_ms - kLedgerRowMs)
                                  : it->first == only_id;
      if (take) {
        due.push_back(std::move(it->second));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  try {
    usage_.Record(due);
  } catch (const std::exception& e) {
    LogError("cannot record usage", {{"error", e.what()}});
  }
}

double SandboxManager::SpentMicrosSince(const std::string& key_id, int64_t since_ms) {
  double spent = usage_.SpentMicrosSince(key_id, since_ms);
  std::lock_guard lock(pending_mu_);
  for (const auto& [id, row] : pending_) {
    if (row.key_id == key_id && row.end_ms > since_ms) spent += row.micros;
  }
  return spent;
}

void SandboxManager::MeterAll(bool flush_all) {
  int64_t now = StableNowMs();
  std::vector<json> records;
  for (auto& s : List(ListFilter{{SandboxState::kRunning}})) {
    Accumulate(MeterOne(*s, now));
    records.push_back(s->Record());
  }
  // A paused sandbox pays for its checkpoint's bytes, as a snapshot would.
  for (auto& s : List(ListFilter{{SandboxState::kPaused}})) {
    Accumulate(MeterPaused(*s, now));
    records.push_back(s->Record());
  }
  std::vector<store::SnapshotRecord> snaps = snapshots_.List();
  std::vector<store::UsageRow> snapshot_rows;
  {
    std::lock_guard lock(mu_);
    std::map<std::string, int64_t> still;
    for (const auto& snap : snaps) {
      // Image storage is metered as the image, a pause checkpoint as its
      // sandbox (above); a fork's own capture is never billed.
      if (snap.image_warm || snap.temporary) continue;
      if (!snap.paused_sandbox.empty()) {
        if (snapshot_metered_ms_.count(snap.id)) still[snap.id] = snapshot_metered_ms_[snap.id];
        continue;
      }
      int64_t since = snapshot_metered_ms_.count(snap.id) ? snapshot_metered_ms_[snap.id]
                                                          : std::max(snap.created_ms, now - 60000);
      store::UsageRow row;
      row.sandbox_id = snap.id;
      row.key_id = snap.owner;
      row.labels = snap.labels;
      row.kind = "snapshot";
      row.start_ms = since;
      row.end_ms = now;
      row.gb_months = SnapshotGbMonths(snap.size_bytes, now - since);
      row.micros = SnapshotStorageMicrosExact(options_.prices, snap.size_bytes, now - since);
      snapshot_rows.push_back(row);
      still[snap.id] = now;
    }
    snapshot_metered_ms_ = std::move(still);
  }
  for (const auto& row : snapshot_rows) Accumulate(row);
  Flush(now, flush_all);
  try {
    records_.Put(records);
  } catch (const std::exception& e) {
    LogError("cannot record sandboxes", {{"error", e.what()}});
  }
}

std::vector<store::UsageStore::Total> SandboxManager::UsageTotals(
    int64_t from_ms, int64_t to_ms, const std::string& group_by,
    const std::optional<std::string>& owner) {
  return usage_.Totals(from_ms, to_ms, group_by, owner);
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
