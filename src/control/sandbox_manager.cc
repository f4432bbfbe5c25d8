#include "control/sandbox_manager.h"

#include <algorithm>
#include <atomic>
#include <set>

#include "common/ids.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"

using nlohmann::json;

namespace kiln::control {

namespace {
constexpr size_t kKeepStopped = 1000;                // stopped sandboxes still listed
constexpr int64_t kKeepRecordsMs = 30 * 86400000LL;  // stopped records in the table
constexpr int64_t kLeaseCapMs = 3600 * 1000;         // :extend moves a lease at most 1 h ahead
// A ledger row covers up to 5 minutes of a sandbox: metered every 5 s, 1,000
// sandboxes would otherwise append 200 rows a second.
constexpr int64_t kLedgerRowMs = 5 * 60 * 1000;
// See engine::kStartupCpuWeight. A first command costs 10-110 ms of CPU.
constexpr int64_t kStartupBoostMs = 5000;
constexpr uint64_t kStartupBoostCpuNs = 150'000'000;
}  // namespace

SandboxManager::SandboxManager(ManagerDeps deps, ManagerOptions options)
    : engine_(deps.engine),
      rootfs_(std::move(deps.rootfs)),
      snapshots_(deps.snapshots),
      records_(deps.records),
      usage_(deps.usage),
      capacity_(deps.capacity),
      egress_(deps.egress),
      options_(std::move(options)),
      pool_(engine_, rootfs_, snapshots_) {
  Recover();
  lease_thread_ = std::thread([this] { LeaseLoop(); });
  meter_thread_ = std::thread([this] { MeterLoop(); });
}

SandboxManager::~SandboxManager() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  lease_thread_.join();
  meter_thread_.join();
  Shutdown("host_stopped");
}

void SandboxManager::Shutdown(const std::string& reason) {
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  capacity_.Close();
  {
    // Starting takes seconds at most; the bound only keeps a wedged runsc
    // from holding up the exit.
    std::unique_lock lock(mu_);
    created_cv_.wait_for(lock, std::chrono::seconds(60), [&] { return creating_ == 0; });
  }
  // In parallel, a few at a time: a daemon with hundreds of sandboxes must
  // still exit within its service manager's stop timeout.
  auto all = List(ListFilter{});
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (size_t w = 0; w < std::min<size_t>(8, all.size()); ++w) {
    workers.emplace_back([&] {
      for (size_t i; (i = next++) < all.size();) Stop(all[i], reason);
    });
  }
  for (auto& t : workers) t.join();
}

void SandboxManager::Recover() {
  std::set<std::string> adopted;
  for (const auto& record : records_.Live()) {
    auto s = Sandbox::FromRecord(record);
    std::string error = "it was " + s->state() + " when the daemon stopped";
    std::shared_ptr<engine::AgentConnection> conn;
    // Only a sandbox that was fully running can be trusted; one caught
    // starting or stopping is taken down.
    if (s->state() == "running") conn = engine_.Attach(s->id(), s->spec().shape, &error);
    {
      std::lock_guard lock(mu_);
      sandboxes_[s->id()] = s;
      order_.push_back(s->id());
    }
    if (conn) {
      capacity_.Adopt(s->spec().owner, s->spec().shape);
      Track(s, conn);
      adopted.insert(s->id());
      LogInfo("re-adopted a running sandbox",
              {{"event", "sandbox.adopted"}, {"sandboxId", s->id()}});
      continue;
    }
    engine_.Destroy(s->id());
    s->MarkStopping("host_lost");
    s->MarkStopped(StableNowMs());
    Save(*s);
    LogWarn("sandbox lost while the daemon was down",
            {{"event", "sandbox.lost"}, {"sandboxId", s->id()}, {"error", error}});
  }
  // Whatever else the engine has (pooled copies, half-made sandboxes) has
  // no owner any more.
  for (const auto& id : engine_.List()) {
    if (adopted.count(id)) continue;
    LogWarn("removing a sandbox left by an earlier daemon", {{"sandboxId", id}});
    engine_.Destroy(id);
  }
  auto stopped = records_.RecentlyStopped(kKeepStopped);
  std::lock_guard lock(mu_);
  std::vector<std::string> old_order;
  for (const auto& record : stopped) {
    auto s = Sandbox::FromRecord(record);
    if (sandboxes_.count(s->id())) continue;
    sandboxes_[s->id()] = s;
    old_order.push_back(s->id());
  }
  order_.insert(order_.begin(), old_order.begin(), old_order.end());
}

void SandboxManager::Save(const Sandbox& sandbox) {
  try {
    records_.Put(sandbox.Record());
  } catch (const std::exception& e) {
    LogError("cannot record sandbox", {{"sandboxId", sandbox.id()}, {"error", e.what()}});
  }
}

void SandboxManager::Track(const std::shared_ptr<Sandbox>& sandbox,
                           std::shared_ptr<engine::AgentConnection> conn) {
  std::weak_ptr<Sandbox> weak = sandbox;
  conn->OnClose([this, weak] {
    // Called on the channel's reader thread: clean up elsewhere.
    std::thread([this, weak] {
      if (auto s = weak.lock(); s && s->running()) Stop(s, "sandbox_died");
    }).detach();
  });
  if (egress_)
    sandbox->SetGate(egress::Gate::Open(*egress_, sandbox->id(), conn, sandbox->network()));
  sandbox->MarkRunning(std::move(conn), StableNowMs());
}

json SandboxManager::SetNetwork(const std::shared_ptr<Sandbox>& sandbox,
                                const network::Policy& policy) {
  int64_t version = sandbox->SetNetwork(policy, NowMs());
  Save(*sandbox);
  LogInfo("network policy set", {{"event", "sandbox.network"},
                                 {"sandboxId", sandbox->id()},
                                 {"version", version},
                                 {"policy", policy.ToJson()}});
  return sandbox->NetworkInfo();
}

namespace {

// A create refused because kilnd is stopping: clients retry elsewhere.
Failure ShuttingDown() {
  return {503, "shutting_down", "kilnd is shutting down; retry against its successor", 1};
}

}  // namespace

std::shared_ptr<Sandbox> SandboxManager::Create(SandboxSpec spec, Deadline deadline,
                                                Failure* failure,
                                                const std::function<bool()>& cancelled) {
  std::optional<store::SnapshotRecord> from;
  if (spec.snapshot) {
    from = snapshots_.Get(*spec.snapshot);
    if (!from) {
      *failure = {404, "snapshot_not_found", "snapshot " + *spec.snapshot + " not found"};
      return nullptr;
    }
    spec.shape = from->shape;  // a copy has the shape of what it copies
    if (spec.labels.empty()) spec.labels = from->labels;
    if (!spec.network && !from->network.is_null()) {
      network::PolicyError error;
      spec.network = network::ParsePolicy(from->network, "network", &error);
    }
  }
  if (spec.max_cost_micros) {
    int64_t worst = MaxLeaseCostMicros(options_.prices, spec.shape, spec.timeout_seconds);
    if (worst > *spec.max_cost_micros) {
      *failure = {409, "budget_exceeded",
                  "the first lease at full CPU would cost " + std::to_string(worst) +
                      " micro-dollars, over maxCostMicros " +
                      std::to_string(*spec.max_cost_micros)};
      return nullptr;
    }
  }
  int64_t queued_at = MonotonicNowMs();
  switch (capacity_.Acquire(spec.owner, spec.shape, deadline, cancelled)) {
    case Capacity::Result::kGranted:
      break;
    case Capacity::Result::kNeverFits:
      *failure = {400, "invalid_request",
                  "body.memoryMiB/vcpu: the shape is more than this host can ever run"};
      return nullptr;
    case Capacity::Result::kQuotaExceeded:
      *failure = {409, "quota_exceeded",
                  "this key already runs its limit of " +
                      std::to_string(capacity_.limits().key_sandboxes) + " sandboxes",
                  capacity_.RetryAfterSeconds()};
      return nullptr;
    case Capacity::Result::kNoCapacity:
      if (std::lock_guard lock(mu_); closing_) {
        *failure = ShuttingDown();
        return nullptr;
      }
      *failure = {409, "no_capacity", "the host is full; retry later or wait longer",
                  capacity_.RetryAfterSeconds()};
      return nullptr;
  }
  {
    std::lock_guard lock(mu_);
    if (closing_) {
      capacity_.Release(spec.owner, spec.shape);
      *failure = ShuttingDown();
      return nullptr;
    }
    ++creating_;
  }
  struct CreateDone {
    SandboxManager* m;
    ~CreateDone() {
      std::lock_guard lock(m->mu_);
      if (--m->creating_ == 0) m->created_cv_.notify_all();
    }
  } done{this};
  int64_t waited_ms = MonotonicNowMs() - queued_at;
  metrics::Observe("kiln_capacity_wait_seconds", {}, static_cast<double>(waited_ms) / 1000.0);
  // A pooled copy was verified when it was restored.
  std::optional<PooledCopy> pooled;
  if (from) {
    pooled = pool_.Take(from->id);
    std::string why;
    // Files hashed once (at seal or an earlier restore) are not hashed again
    // while unchanged (SnapshotStore), so this costs a stat per file.
    if (!pooled && !snapshots_.Verify(from->id, &why)) {
      capacity_.Release(spec.owner, spec.shape);
      *failure = {409, "snapshot_corrupted", why};
      return nullptr;
    }
  }
  auto sandbox =
      std::make_shared<Sandbox>(pooled ? pooled->id : NewUuid(), std::move(spec), StableNowMs());
  {
    std::lock_guard lock(mu_);
    sandboxes_[sandbox->id()] = sandbox;
    order_.push_back(sandbox->id());
  }
  Save(*sandbox);  // "starting": a restart knows to look for it
  int64_t t0 = MonotonicNowMs();
  engine::CreateParams params{sandbox->id(), sandbox->spec().shape, rootfs_};
  std::string error;
  std::shared_ptr<engine::AgentConnection> conn;
  if (pooled) {
    conn = pooled->conn;
  } else if (from) {
    conn = engine_.Restore(params, snapshots_.CheckpointDir(from->id), &error);
  } else {
    conn = engine_.Create(params, &error);
  }
  if (!conn) {
    sandbox->MarkStopping("startup_failed");
    sandbox->MarkStopped(StableNowMs());
    capacity_.Release(sandbox->spec().owner, sandbox->spec().shape);
    Save(*sandbox);
    LogError("sandbox failed to start", {{"sandboxId", sandbox->id()}, {"error", error}});
    *failure = {500, "startup_failed", "the sandbox failed to start: " + error};
    return nullptr;
  }
  // Metering starts now: CPU a pooled copy used while waiting is not the user's.
  Sandbox::Meter m;
  m.cpu_ns = engine_.GetUsage(sandbox->id()).cpu_ns;
  m.at_ms = StableNowMs();
  sandbox->SetMeter(m);
  if (from) sandbox->BeginStartupBoost(m.cpu_ns);  // the engine restored it boosted
  Track(sandbox, conn);
  Save(*sandbox);
  LogInfo("sandbox started", {{"event", "sandbox.running"},
                              {"sandboxId", sandbox->id()},
                              {"owner", sandbox->spec().owner},
                              {"snapshotId", from ? json(from->id) : json(nullptr)},
                              {"pooled", pooled.has_value()},
                              {"queuedMs", waited_ms},
                              {"startMs", MonotonicNowMs() - t0}});
  return sandbox;
}

std::optional<store::SnapshotRecord> SandboxManager::Snapshot(
    const std::shared_ptr<Sandbox>& sandbox, const SnapshotOptions& options, Failure* failure) {
  if (!sandbox->running()) {
    *failure = {409, "not_running", "sandbox " + sandbox->id() + " is " + sandbox->state()};
    return std::nullopt;
  }
  store::SnapshotRecord rec;
  rec.id = NewUuid();
  rec.owner = sandbox->spec().owner;
  rec.name = options.name;
  rec.labels = options.labels.empty() ? sandbox->spec().labels : options.labels;
  rec.source_sandbox_id = sandbox->id();
  rec.shape = sandbox->spec().shape;
  rec.retention_days = options.retention_days;
  rec.network = sandbox->network().ToJson();
  engine::CheckpointStats stats;
  std::string error;
  if (!engine_.Checkpoint(sandbox->id(), snapshots_.CheckpointDir(rec.id), &stats, &error)) {
    snapshots_.Discard(rec.id);
    *failure = {sandbox->running() ? 500 : 409,
                sandbox->running() ? "snapshot_failed" : "not_running", error};
    return std::nullopt;
  }
  rec.created_ms = StableNowMs();
  rec.expires_ms = rec.created_ms + static_cast<int64_t>(rec.retention_days) * 86400000;
  rec.size_bytes = stats.bytes;
  rec.capture_ms = stats.duration_ms;
  if (!snapshots_.Seal(rec, &error)) {
    *failure = {500, "snapshot_failed", error};
    return std::nullopt;
  }
  {
    std::lock_guard lock(mu_);
    snapshot_metered_ms_[rec.id] = rec.created_ms;
  }
  if (options_.default_pool_size > 0 && options.pool)
    pool_.Resize(rec.id, options_.default_pool_size);
  LogInfo("snapshot ready", {{"event", "snapshot.ready"},
                             {"snapshotId", rec.id},
                             {"sandboxId", sandbox->id()},
                             {"captureMs", stats.duration_ms},
                             {"bytes", stats.bytes}});
  return rec;
}

std::vector<std::shared_ptr<Sandbox>> SandboxManager::Fork(
    const std::shared_ptr<Sandbox>& source, int count,
    const std::map<std::string, std::string>& labels, bool keep_snapshot, Deadline deadline,
    Failure* failure, std::optional<network::Policy> network) {
  SnapshotOptions opts;
  opts.labels = labels;
  opts.retention_days = 1;
  opts.pool = false;  // the fork's own snapshot serves only this fork
  auto snap = Snapshot(source, opts, failure);
  if (!snap) return {};
  std::vector<std::shared_ptr<Sandbox>> copies(static_cast<size_t>(count));
  std::vector<Failure> failures(static_cast<size_t>(count));
  std::vector<std::thread> threads;
  for (int i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      SandboxSpec spec;
      spec.owner = source->spec().owner;
      spec.snapshot = snap->id;
      spec.labels = labels.empty() ? source->spec().labels : labels;
      spec.env = source->spec().env;
      spec.timeout_seconds = source->spec().timeout_seconds;
      spec.network = network ? network : source->network();
      copies[static_cast<size_t>(i)] =
          Create(std::move(spec), deadline, &failures[static_cast<size_t>(i)]);
    });
  }
  for (auto& t : threads) t.join();
  if (!keep_snapshot) DeleteSnapshot(snap->id);
  std::vector<std::shared_ptr<Sandbox>> started;
  for (size_t i = 0; i < copies.size(); ++i) {
    if (copies[i]) {
      started.push_back(copies[i]);
    } else {
      *failure = failures[i];
    }
  }
  return started;
}

std::shared_ptr<Sandbox> SandboxManager::Get(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  return it == sandboxes_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<Sandbox>> SandboxManager::List(const ListFilter& f) const {
  std::vector<std::shared_ptr<Sandbox>> out;
  std::lock_guard lock(mu_);
  for (const auto& id : order_) {
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end()) continue;
    const auto& s = it->second;
    if (f.owner && s->spec().owner != *f.owner) continue;
    std::string state = s->state();
    if (f.states.empty()) {
      if (state == "stopped" && !f.include_stopped) continue;
    } else if (std::find(f.states.begin(), f.states.end(), state) == f.states.end()) {
      continue;
    }
    bool match = true;
    for (const auto& [k, v] : f.labels) {
      auto l = s->spec().labels.find(k);
      if (l == s->spec().labels.end() || l->second != v) match = false;
    }
    if (match) out.push_back(s);
  }
  return out;
}

std::map<std::string, int> SandboxManager::CountByState() const {
  std::map<std::string, int> counts{{"starting", 0}, {"running", 0}, {"stopping", 0}};
  std::lock_guard lock(mu_);
  for (const auto& [id, s] : sandboxes_) {
    std::string st = s->state();
    if (st != "stopped") ++counts[st];
  }
  return counts;
}

int64_t SandboxManager::Extend(const std::shared_ptr<Sandbox>& sandbox, int64_t seconds) {
  int64_t end = sandbox->Extend(seconds, StableNowMs(), kLeaseCapMs);
  Save(*sandbox);
  LogInfo("lease extended", {{"event", "sandbox.extended"},
                             {"sandboxId", sandbox->id()},
                             {"expiresAt", FormatTime(end)}});
  return end;
}

store::UsageRow SandboxManager::MeterOne(Sandbox& s, int64_t now_ms) {
  std::lock_guard lock(meter_mu_);
  Sandbox::Meter m = s.meter();
  uint64_t cpu_now = engine_.GetUsage(s.id()).cpu_ns;
  // A zero reading means the cgroup is gone; charge no CPU for it.
  uint64_t cpu = cpu_now >= m.cpu_ns ? cpu_now - m.cpu_ns : 0;
  int64_t wall = std::max<int64_t>(0, now_ms - m.at_ms);
  UsageDelta d = MeterInterval(options_.prices, s.spec().shape, cpu, wall);
  metrics::Inc("kiln_metered_cpu_seconds_total", {}, d.cpu_seconds);
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
  for (auto& s : List(ListFilter{{"running"}})) {
    Accumulate(MeterOne(*s, now));
    records.push_back(s->Record());
  }
  std::vector<store::SnapshotRecord> snaps = snapshots_.List();
  std::vector<store::UsageRow> snapshot_rows;
  {
    std::lock_guard lock(mu_);
    std::map<std::string, int64_t> still;
    for (const auto& snap : snaps) {
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

void SandboxManager::Stop(const std::shared_ptr<Sandbox>& sandbox, const std::string& reason) {
  if (!sandbox->MarkStopping(reason)) {
    // Someone else is stopping it: wait until they are done.
    while (sandbox->state() != "stopped")
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return;
  }
  Save(*sandbox);
  // No more egress: cut its connections before the sandbox goes away.
  if (auto gate = sandbox->TakeGate()) gate->Close();
  // The last reading, while its cgroup still exists.
  Accumulate(MeterOne(*sandbox, StableNowMs()));
  engine_.Destroy(sandbox->id());
  sandbox->MarkStopped(StableNowMs());
  capacity_.Release(sandbox->spec().owner, sandbox->spec().shape);
  Flush(StableNowMs(), false, sandbox->id());
  Save(*sandbox);
  LogInfo("sandbox stopped", {{"event", "sandbox.stopped"},
                              {"sandboxId", sandbox->id()},
                              {"reason", reason},
                              {"chargedMicros", static_cast<int64_t>(sandbox->meter().micros)}});
  std::lock_guard lock(mu_);
  // Forget the oldest stopped ones beyond what listings keep.
  size_t stopped = 0;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    auto s = sandboxes_.find(*it);
    if (s != sandboxes_.end() && s->second->state() == "stopped" && ++stopped > kKeepStopped) {
      sandboxes_.erase(s);
    }
  }
  std::erase_if(order_, [&](const std::string& id) { return !sandboxes_.count(id); });
}

std::optional<nlohmann::json> SandboxManager::Delete(const std::string& id,
                                                     const std::optional<std::string>& owner) {
  auto s = Get(id);
  if (!s) {
    std::lock_guard lock(mu_);
    auto it = deleted_.find(id);
    if (it == deleted_.end() || (owner && it->second.owner != *owner)) return std::nullopt;
    return it->second.answer;
  }
  if (owner && s->spec().owner != *owner) return std::nullopt;
  Stop(s, "requested");
  nlohmann::json info = s->Info();
  nlohmann::json answer = {{"id", id},
                           {"kind", "sandbox"},
                           {"name", info["name"]},
                           {"labels", info["labels"]},
                           {"status", "deleted"},
                           {"state", info["state"]},
                           {"deletedAt", FormatTime(StableNowMs())},
                           {"endedAt", info["endedAt"]},
                           {"chargedMicros", info["chargedMicros"]}};
  records_.Remove(id);
  std::lock_guard lock(mu_);
  sandboxes_.erase(id);
  std::erase(order_, id);
  int64_t now = StableNowMs();
  std::erase_if(deleted_, [&](const auto& d) { return d.second.at_ms < now - 86400000; });
  deleted_[id] = {now, s->spec().owner, answer};
  return answer;
}

bool SandboxManager::DeleteSnapshot(const std::string& id) {
  pool_.Drop(id);
  return snapshots_.Delete(id);
}

void SandboxManager::CommandFinished(const std::shared_ptr<Sandbox>& sandbox) {
  EndStartupBoost(sandbox);
}

void SandboxManager::EndStartupBoost(const std::shared_ptr<Sandbox>& sandbox) {
  if (sandbox->EndStartupBoost()) engine_.SetCpuWeight(sandbox->id(), engine::kCpuWeight);
}

void SandboxManager::LeaseLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    // 100 ms: also how late a start-up weight may end (see below).
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    int64_t now = StableNowMs();
    std::vector<std::shared_ptr<Sandbox>> expired, unboost;
    for (const auto& [id, s] : sandboxes_) {
      if (s->running() && s->expires_ms() <= now) expired.push_back(s);
      if (s->running() && s->boosted()) unboost.push_back(s);
    }
    lock.unlock();
    // The start-up weight ends after kStartupBoostMs, or once the sandbox
    // has used kStartupBoostCpuNs: a first command that burns CPU (a hung
    // program under a grader) must not keep 8x the weight of its neighbours.
    for (auto& s : unboost) {
      if (s->ready_ms() + kStartupBoostMs <= now ||
          engine_.GetUsage(s->id()).cpu_ns - s->boost_base_cpu_ns() >= kStartupBoostCpuNs)
        EndStartupBoost(s);
    }
    for (auto& s : expired) std::thread([this, s] { Stop(s, "lease_expired"); }).detach();
    for (const auto& id : snapshots_.DeleteExpired(now)) {
      pool_.Drop(id);
      LogInfo("snapshot expired", {{"event", "snapshot.expired"}, {"snapshotId", id}});
    }
    lock.lock();
  }
}

void SandboxManager::MeterLoop() {
  std::unique_lock lock(mu_);
  int64_t last_prune = 0;
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(options_.meter_interval_ms));
    if (stopping_) break;
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
