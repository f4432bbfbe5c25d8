#include "control/sandbox_manager.h"

#include <algorithm>

#include "common/ids.h"
#include "common/log.h"
#include "common/time.h"

using nlohmann::json;

namespace kiln::control {

namespace {
constexpr size_t kKeepStopped = 1000;  // stopped sandboxes still listed
}

SandboxManager::SandboxManager(engine::Engine& engine, std::string rootfs,
                               store::SnapshotStore& snapshots, int default_pool_size)
    : engine_(engine),
      rootfs_(std::move(rootfs)),
      snapshots_(snapshots),
      default_pool_size_(default_pool_size),
      pool_(engine, rootfs_, snapshots) {
  lease_thread_ = std::thread([this] { LeaseLoop(); });
}

SandboxManager::~SandboxManager() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  lease_thread_.join();
  for (auto& s : List(ListFilter{})) Stop(s, "host_stopped");
}

std::shared_ptr<Sandbox> SandboxManager::Create(SandboxSpec spec, Failure* failure) {
  std::optional<store::SnapshotRecord> from;
  std::optional<PooledCopy> pooled;
  if (spec.snapshot) {
    from = snapshots_.Get(*spec.snapshot);
    if (!from) {
      *failure = {404, "snapshot_not_found", "snapshot " + *spec.snapshot + " not found"};
      return nullptr;
    }
    spec.shape = from->shape;  // a copy has the shape of what it copies
    if (spec.labels.empty()) spec.labels = from->labels;
    // A pooled copy was verified when it was restored.
    pooled = pool_.Take(from->id);
    std::string why;
    if (!pooled && !spec.snapshot_just_sealed && !snapshots_.Verify(from->id, &why)) {
      *failure = {409, "snapshot_corrupted", why};
      return nullptr;
    }
  }
  auto sandbox =
      std::make_shared<Sandbox>(pooled ? pooled->id : NewUuid(), std::move(spec), NowMs());
  {
    std::lock_guard lock(mu_);
    sandboxes_[sandbox->id()] = sandbox;
    order_.push_back(sandbox->id());
  }
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
    sandbox->MarkStopped(NowMs());
    LogError("sandbox failed to start", {{"sandboxId", sandbox->id()}, {"error", error}});
    *failure = {500, "startup_failed", "the sandbox failed to start: " + error};
    return nullptr;
  }
  std::weak_ptr<Sandbox> weak = sandbox;
  conn->OnClose([this, weak] {
    // Called on the channel's reader thread: clean up elsewhere.
    std::thread([this, weak] {
      if (auto s = weak.lock(); s && s->running()) Stop(s, "sandbox_died");
    }).detach();
  });
  sandbox->MarkRunning(conn, NowMs());
  LogInfo("sandbox started", {{"event", "sandbox.running"},
                              {"sandboxId", sandbox->id()},
                              {"snapshotId", from ? json(from->id) : json(nullptr)},
                              {"pooled", pooled.has_value()},
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
  rec.name = options.name;
  rec.labels = options.labels.empty() ? sandbox->spec().labels : options.labels;
  rec.source_sandbox_id = sandbox->id();
  rec.shape = sandbox->spec().shape;
  rec.retention_days = options.retention_days;
  engine::CheckpointStats stats;
  std::string error;
  if (!engine_.Checkpoint(sandbox->id(), snapshots_.CheckpointDir(rec.id), &stats, &error)) {
    snapshots_.Discard(rec.id);
    *failure = {sandbox->running() ? 500 : 409,
                sandbox->running() ? "snapshot_failed" : "not_running", error};
    return std::nullopt;
  }
  rec.created_ms = NowMs();
  rec.expires_ms = rec.created_ms + static_cast<int64_t>(rec.retention_days) * 86400000;
  rec.size_bytes = stats.bytes;
  rec.capture_ms = stats.duration_ms;
  if (!snapshots_.Seal(rec, &error)) {
    *failure = {500, "snapshot_failed", error};
    return std::nullopt;
  }
  if (default_pool_size_ > 0 && options.pool) pool_.Resize(rec.id, default_pool_size_);
  LogInfo("snapshot ready", {{"event", "snapshot.ready"},
                             {"snapshotId", rec.id},
                             {"sandboxId", sandbox->id()},
                             {"captureMs", stats.duration_ms},
                             {"bytes", stats.bytes}});
  return rec;
}

std::vector<std::shared_ptr<Sandbox>> SandboxManager::Fork(
    const std::shared_ptr<Sandbox>& source, int count,
    const std::map<std::string, std::string>& labels, bool keep_snapshot, Failure* failure) {
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
      spec.snapshot = snap->id;
      spec.snapshot_just_sealed = true;
      spec.labels = labels.empty() ? source->spec().labels : labels;
      spec.env = source->spec().env;
      spec.timeout_seconds = source->spec().timeout_seconds;
      copies[static_cast<size_t>(i)] = Create(std::move(spec), &failures[static_cast<size_t>(i)]);
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

void SandboxManager::Stop(const std::shared_ptr<Sandbox>& sandbox, const std::string& reason) {
  if (!sandbox->MarkStopping(reason)) {
    // Someone else is stopping it: wait until they are done.
    while (sandbox->state() != "stopped")
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return;
  }
  engine_.Destroy(sandbox->id());
  sandbox->MarkStopped(NowMs());
  LogInfo("sandbox stopped",
          {{"event", "sandbox.stopped"}, {"sandboxId", sandbox->id()}, {"reason", reason}});
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

std::optional<nlohmann::json> SandboxManager::Delete(const std::string& id) {
  auto s = Get(id);
  if (!s) {
    std::lock_guard lock(mu_);
    auto it = deleted_.find(id);
    if (it == deleted_.end()) return std::nullopt;
    return it->second.second;
  }
  Stop(s, "requested");
  nlohmann::json info = s->Info();
  nlohmann::json answer = {{"id", id},
                           {"kind", "sandbox"},
                           {"name", info["name"]},
                           {"labels", info["labels"]},
                           {"status", "deleted"},
                           {"state", info["state"]},
                           {"deletedAt", FormatTime(NowMs())},
                           {"endedAt", info["endedAt"]}};
  std::lock_guard lock(mu_);
  sandboxes_.erase(id);
  std::erase(order_, id);
  int64_t now = NowMs();
  std::erase_if(deleted_, [&](const auto& d) { return d.second.first < now - 86400000; });
  deleted_[id] = {now, answer};
  return answer;
}

bool SandboxManager::DeleteSnapshot(const std::string& id) {
  pool_.Drop(id);
  return snapshots_.Delete(id);
}

void SandboxManager::LeaseLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(500));
    int64_t now = NowMs();
    std::vector<std::shared_ptr<Sandbox>> expired;
    for (const auto& [id, s] : sandboxes_) {
      if (s->running() && s->expires_ms() <= now) expired.push_back(s);
    }
    lock.unlock();
    for (auto& s : expired) std::thread([this, s] { Stop(s, "lease_expired"); }).detach();
    for (const auto& id : snapshots_.DeleteExpired(now))
      LogInfo("snapshot expired", {{"snapshotId", id}});
    lock.lock();
  }
}

}  // namespace kiln::control
