#include "control/sandbox_manager.h"

#include <algorithm>

#include "common/ids.h"
#include "common/log.h"
#include "common/time.h"

namespace kiln::control {

namespace {
constexpr size_t kKeepStopped = 1000;  // stopped sandboxes still listed
}

SandboxManager::SandboxManager(engine::Engine& engine, std::string rootfs)
    : engine_(engine), rootfs_(std::move(rootfs)) {
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

std::shared_ptr<Sandbox> SandboxManager::Create(SandboxSpec spec, std::string* error) {
  auto sandbox = std::make_shared<Sandbox>(NewUuid(), std::move(spec), NowMs());
  {
    std::lock_guard lock(mu_);
    sandboxes_[sandbox->id()] = sandbox;
    order_.push_back(sandbox->id());
  }
  int64_t t0 = MonotonicNowMs();
  engine::CreateParams params{sandbox->id(), sandbox->spec().shape, rootfs_};
  auto conn = engine_.Create(params, error);
  if (!conn) {
    sandbox->MarkStopping("startup_failed");
    sandbox->MarkStopped(NowMs());
    LogError("sandbox failed to start", {{"sandboxId", sandbox->id()}, {"error", *error}});
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
                              {"startMs", MonotonicNowMs() - t0}});
  return sandbox;
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
    lock.lock();
  }
}

}  // namespace kiln::control
