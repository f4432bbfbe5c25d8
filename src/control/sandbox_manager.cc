#include "control/sandbox_manager.h"

// The lifecycle's core: construction and shutdown, the table (get, list,
// save), tracking a running sandbox, stop and delete, and the lease loop.
// Create: sandbox_create.cc; snapshot and fork: sandbox_capture.cc; pause
// and wake: sandbox_pause.cc; recovery: sandbox_recover.cc; metering:
// sandbox_metering.cc; :update: sandbox_update.cc.
#include "control/sandbox_manager.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>

#include "common/log.h"
#include "common/time.h"

namespace kiln::control {

namespace {
// See engine::kStartupCpuWeight. A first command costs 10-110 ms of CPU.
constexpr int64_t kStartupBoostMs = 5000;
constexpr uint64_t kStartupBoostCpuNs = 150'000'000;
}  // namespace

SandboxManager::SandboxManager(ManagerDeps deps, ManagerOptions options)
    : engine_(deps.engine),
      rootfs_(std::move(deps.rootfs)),
      snapshots_(deps.snapshots),
      records_(deps.records),
      capacity_(deps.capacity),
      egress_(deps.egress),
      options_(std::move(options)),
      catalogue_(engine_, rootfs_, snapshots_, capacity_, options_.pool,
                 options_.default_pool_size),
      ledger_(deps.usage) {
  Recover();
  catalogue_.pool().LoadPins();  // after Recover, which destroys every copy it did not start
  lease_thread_ = std::jthread([this](std::stop_token stop) { LeaseLoop(stop); });
  meter_thread_ = std::jthread([this](std::stop_token stop) { MeterLoop(stop); });
}

SandboxManager::~SandboxManager() {
  lease_thread_.request_stop();
  meter_thread_.request_stop();
  lease_thread_.join();
  meter_thread_.join();
  Shutdown("host_stopped");
  // Stops begun on their own threads use this manager: wait them out.
  std::unique_lock lock(mu_);
  background_cv_.wait(lock, [&] { return background_stops_ == 0; });
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
  // Paused sandboxes stay paused (their checkpoints are on disk), and
  // persistent ones are paused, for the next kilnd to keep.
  auto all = List(ListFilter{});
  std::erase_if(all, [](const auto& s) { return s->state() == SandboxState::kPaused; });
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (size_t w = 0; w < std::min<size_t>(8, all.size()); ++w) {
    workers.emplace_back([&] {
      for (size_t i; (i = next++) < all.size();) {
        const auto& s = all[i];
        if (s->spec().persistent && s->spec().pausable && s->running() &&
            Pause(s, "host_stopped").ok())
          continue;
        Stop(s, reason);
      }
    });
  }
  for (auto& t : workers) t.join();
}

void SandboxManager::StopInBackground(std::shared_ptr<Sandbox> sandbox, std::string reason,
                                      bool remove) {
  {
    std::lock_guard lock(mu_);
    ++background_stops_;
  }
  auto work = [this, sandbox, reason, remove] {
    Stop(sandbox, reason);
    if (remove) Delete(sandbox->id(), std::nullopt);
    std::lock_guard lock(mu_);
    if (--background_stops_ == 0) background_cv_.notify_all();
  };
  try {
    std::thread(work).detach();
  } catch (const std::system_error& e) {
    // No thread to spare (the host is at its limit): stopped here, on the
    // caller's thread, rather than not at all.
    LogWarn("no thread for a stop: stopping in place",
            {{"sandboxId", sandbox->id()}, {"error", e.what()}});
    work();
  }
}

void SandboxManager::Save(const Sandbox& sandbox) {
  try {
    records_.Put(nlohmann::json(sandbox.Record()));
  } catch (const std::exception& e) {
    LogError("cannot record sandbox", {{"sandboxId", sandbox.id()}, {"error", e.what()}});
  }
}

void SandboxManager::Watch(const std::shared_ptr<Sandbox>& sandbox,
                           const std::shared_ptr<engine::AgentChannel>& conn) {
  std::weak_ptr<Sandbox> weak = sandbox;
  std::weak_ptr<engine::AgentChannel> weak_conn = conn;
  conn->OnClose([this, weak, weak_conn] {
    // Called on the channel's reader thread: clean up elsewhere. A channel
    // kiln gave up on (its agent broke the protocol or stopped reading)
    // says why; one the sandbox closed means it died.
    std::string reason;
    if (auto c = weak_conn.lock()) reason = c->close_reason();
    if (auto s = weak.lock(); s && s->running())
      StopInBackground(s, reason.empty() ? "sandbox_died" : reason);
  });
  if (egress_)
    sandbox->SetGate(egress::Gate::Open(*egress_, sandbox->id(), conn, sandbox->network()));
}

void SandboxManager::Track(const std::shared_ptr<Sandbox>& sandbox,
                           std::shared_ptr<engine::AgentChannel> conn) {
  Watch(sandbox, conn);
  sandbox->MarkRunning(std::move(conn), StableNowMs());
}

Result<int64_t> SandboxManager::SetNetwork(const std::shared_ptr<Sandbox>& sandbox,
                                           const network::Policy& policy) {
  SandboxState state = sandbox->state();
  if (state == SandboxState::kStopping || state == SandboxState::kStopped)
    return sandbox->RequireRunning();
  int64_t version = sandbox->SetNetwork(policy, NowMs());
  Save(*sandbox);
  LogInfo("network policy set", {{"event", "sandbox.network"},
                                 {"sandboxId", sandbox->id()},
                                 {"version", version},
                                 {"policy", policy.ToJson()}});
  return version;
}

std::shared_ptr<Sandbox> SandboxManager::Get(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  return it == sandboxes_.end() ? nullptr : it->second;
}

std::shared_ptr<Sandbox> SandboxManager::FindByName(const std::string& owner,
                                                    const std::string& name) const {
  std::lock_guard lock(mu_);
  for (const auto& [id, s] : sandboxes_) {
    if (s->spec().owner == owner && s->spec().name == name && s->state() != SandboxState::kStopped)
      return s;
  }
  return nullptr;
}

std::vector<std::shared_ptr<Sandbox>> SandboxManager::List(const ListFilter& f) const {
  std::vector<std::shared_ptr<Sandbox>> out;
  std::lock_guard lock(mu_);
  for (const auto& id : order_) {
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end()) continue;
    const auto& s = it->second;
    if (f.owner && s->spec().owner != *f.owner) continue;
    if (f.name && s->spec().name != f.name) continue;
    SandboxState state = s->state();
    if (f.states.empty()) {
      if (state == SandboxState::kStopped && !f.include_stopped) continue;
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

std::map<SandboxState, int> SandboxManager::CountByState() const {
  std::map<SandboxState, int> counts{{SandboxState::kStarting, 0},
                                     {SandboxState::kRunning, 0},
                                     {SandboxState::kStopping, 0},
                                     {SandboxState::kPaused, 0}};
  std::lock_guard lock(mu_);
  for (const auto& [id, s] : sandboxes_) {
    SandboxState st = s->state();
    if (st != SandboxState::kStopped) ++counts[st];
  }
  return counts;
}

Result<int64_t> SandboxManager::Extend(const std::shared_ptr<Sandbox>& sandbox, int64_t seconds) {
  if (Status running = sandbox->RequireRunning(); !running.ok()) return running;
  int64_t end = sandbox->Extend(seconds, StableNowMs(), int64_t{options_.max_lease_seconds} * 1000);
  Save(*sandbox);
  LogInfo("lease extended", {{"event", "sandbox.extended"},
                             {"sandboxId", sandbox->id()},
                             {"expiresAt", FormatTime(end)}});
  return end;
}

void SandboxManager::Stop(const std::shared_ptr<Sandbox>& sandbox, const std::string& reason) {
  std::optional<SandboxState> left;
  while (!(left = sandbox->MarkStopping(reason))) {
    // Someone else is stopping it (wait until they are done), or a pause or
    // wake is under way (wait for it to settle, then stop what it left).
    if (sandbox->state() == SandboxState::kStopped) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Save(*sandbox);
  if (*left == SandboxState::kPaused) {
    // Nothing of it runs: only its checkpoint is left, and capacity was
    // given back when it paused.
    std::string checkpoint = sandbox->Record().checkpoint;
    ledger_.Accumulate(MeterPaused(*sandbox, StableNowMs()));
    if (!checkpoint.empty()) snapshots_.Delete(checkpoint);
    sandbox->MarkStopped(StableNowMs());
    ledger_.FlushOne(sandbox->id());
    Save(*sandbox);
    LogInfo("paused sandbox stopped",
            {{"event", "sandbox.stopped"}, {"sandboxId", sandbox->id()}, {"reason", reason}});
    return;
  }
  // The channel ended with MarkStopping (nothing here waits on the agent);
  // egress is cut, then the engine takes the sandbox down from the host.
  // No more egress: cut its connections before the sandbox goes away.
  if (auto gate = sandbox->TakeGate()) gate->Close();
  // The last reading, while its cgroup still exists.
  ledger_.Accumulate(MeterOne(*sandbox, StableNowMs()));
  engine_.Destroy(sandbox->id());
  sandbox->MarkStopped(StableNowMs());
  capacity_.Release(sandbox->spec().owner, sandbox->spec().shape);
  ledger_.FlushOne(sandbox->id());
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
    if (s != sandboxes_.end() && s->second->state() == SandboxState::kStopped &&
        ++stopped > kKeepStopped) {
      sandboxes_.erase(s);
    }
  }
  std::erase_if(order_, [&](const std::string& id) { return !sandboxes_.count(id); });
}

std::optional<DeletedSandbox> SandboxManager::Delete(const std::string& id,
                                                     const std::optional<std::string>& owner) {
  auto s = Get(id);
  if (!s) {
    std::lock_guard lock(mu_);
    auto it = deleted_.find(id);
    if (it == deleted_.end() || (owner && it->second.record.spec.owner != *owner))
      return std::nullopt;
    return it->second;
  }
  if (owner && s->spec().owner != *owner) return std::nullopt;
  Stop(s, "requested");
  DeletedSandbox gone{s->Record(), StableNowMs()};
  records_.Remove(id);
  std::lock_guard lock(mu_);
  sandboxes_.erase(id);
  std::erase(order_, id);
  std::erase_if(deleted_,
                [&](const auto& d) { return d.second.deleted_ms < gone.deleted_ms - 86400000; });
  deleted_[id] = gone;
  return gone;
}

void SandboxManager::CommandFinished(const std::shared_ptr<Sandbox>& sandbox) {
  EndStartupBoost(sandbox);
}

void SandboxManager::EndStartupBoost(const std::shared_ptr<Sandbox>& sandbox) {
  if (sandbox->EndStartupBoost()) engine_.SetCpuWeight(sandbox->id(), engine::kCpuWeight);
}

void SandboxManager::LeaseLoop(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    // 100 ms: also how late a start-up weight may end (see below).
    cv_.wait_for(lock, stop, std::chrono::milliseconds(100), [] { return false; });
    if (stop.stop_requested()) break;
    int64_t now = StableNowMs();
    std::vector<std::shared_ptr<Sandbox>> unboost;
    for (const auto& [id, s] : sandboxes_) {
      if (s->running() && s->boosted()) unboost.push_back(s);
    }
    lock.unlock();
    EnforceLifetimes(now);
    // The start-up weight ends after kStartupBoostMs, or once the sandbox
    // has used kStartupBoostCpuNs: a first command that burns CPU (a hung
    // program under a grader) must not keep 8x the weight of its neighbours.
    for (auto& s : unboost) {
      if (s->ready_ms() + kStartupBoostMs <= now ||
          engine_.GetUsage(s->id()).cpu_ns - s->boost_base_cpu_ns() >= kStartupBoostCpuNs)
        EndStartupBoost(s);
    }
    catalogue_.DeleteExpired(now);
    lock.lock();
  }
}

}  // namespace kiln::control
