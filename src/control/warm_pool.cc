#include "control/warm_pool.h"

#include "common/ids.h"
#include "common/log.h"
#include "common/time.h"
#include "control/snapshot_copy.h"
#include "engine/agent_client.h"

namespace kiln::control {

WarmPool::WarmPool(engine::Engine& engine, std::string rootfs, store::SnapshotStore& snapshots,
                   WarmPoolOptions options, Capacity* capacity)
    : engine_(engine),
      capacity_(capacity),
      rootfs_(std::move(rootfs)),
      snapshots_(snapshots),
      options_(options) {
  for (int i = 0; i < kFillers; ++i)
    fillers_.emplace_back([this](std::stop_token stop) { FillLoop(stop); });
}

WarmPool::~WarmPool() {
  for (auto& t : fillers_) t.request_stop();
  fillers_.clear();  // joins
  std::lock_guard lock(mu_);
  for (auto& [id, p] : pools_) Destroy(std::move(p.ready));
}

void WarmPool::Resize(const std::string& snapshot_id, int size) {
  std::deque<PooledCopy> extra;
  {
    std::lock_guard lock(mu_);
    Pool& p = pools_[snapshot_id];
    p.size = size;
    while (static_cast<int>(p.ready.size()) > size) {
      extra.push_back(std::move(p.ready.back()));
      p.ready.pop_back();
    }
    if (size == 0 && p.filling == 0) pools_.erase(snapshot_id);
  }
  cv_.notify_all();
  Destroy(std::move(extra));
}

std::optional<PooledCopy> WarmPool::Take(const std::string& snapshot_id, const std::string& key) {
  for (;;) {
    PooledCopy copy;
    bool thawed = true;
    {
      std::lock_guard lock(mu_);
      auto it = pools_.find(snapshot_id);
      if (it == pools_.end() || it->second.ready.empty()) return std::nullopt;
      auto& ready = it->second.ready;
      copy = std::move(ready.front());
      ready.pop_front();
      // Freezer changes happen under the lock (a millisecond or two), so a
      // copy is never frozen after it was handed out.
      if (copy.frozen) thawed = engine_.Thaw(copy.id);
      if (!ready.empty() && ready.front().frozen)
        ready.front().frozen = !engine_.Thaw(ready.front().id);
    }
    cv_.notify_all();  // refill in the background
    if (!thawed) {
      LogWarn("discarding a pooled copy that does not thaw", {{"sandboxId", copy.id}});
      Destroy({std::move(copy)});
      continue;
    }
    // Handed out once, and only alive: a copy whose agent does not answer
    // (it died while waiting) is discarded. The answer also tells the
    // copy's clock, which gVisor takes from the host on restore.
    auto pong = engine::AgentClient(copy.channel).Ping(options_.ping_timeout_ms);
    if (pong.ok()) {
      int64_t skew = pong->time_ms - NowMs();
      if (skew > 100 || skew < -100)
        LogWarn("pooled copy's clock is off", {{"sandboxId", copy.id}, {"skewMs", skew}});
      // Handed out: its room is now the key's.
      if (capacity_) capacity_->HandOut(key, copy.shape);
      return copy;
    }
    LogWarn("discarding a pooled copy that does not answer", {{"sandboxId", copy.id}});
    Destroy({std::move(copy)});
  }
}

PoolStatus WarmPool::StatusOf(const std::string& snapshot_id) {
  PoolStatus s;
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mu_);
    auto it = pools_.find(snapshot_id);
    if (it == pools_.end()) return s;
    s.size = it->second.size;
    s.ready = static_cast<int>(it->second.ready.size());
    for (const auto& c : it->second.ready) ids.push_back(c.id);
  }
  for (const auto& id : ids) s.memory_bytes += engine_.GetUsage(id).memory_bytes;
  return s;
}

std::map<std::string, PoolStatus> WarmPool::StatusAll() {
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, pool] : pools_) ids.push_back(id);
  }
  std::map<std::string, PoolStatus> out;
  for (const auto& id : ids) out[id] = StatusOf(id);
  return out;
}

void WarmPool::Drop(const std::string& snapshot_id) {
  std::deque<PooledCopy> copies;
  {
    std::lock_guard lock(mu_);
    auto it = pools_.find(snapshot_id);
    if (it == pools_.end()) return;
    copies = std::move(it->second.ready);
    it->second.ready.clear();
    it->second.size = 0;
    if (it->second.filling == 0) pools_.erase(it);
  }
  Destroy(std::move(copies));
}

void WarmPool::Destroy(std::deque<PooledCopy> copies) {
  for (auto& c : copies) {
    c.channel->Close();
    engine_.Destroy(c.id);
    if (capacity_) capacity_->ReleasePool(c.shape);
  }
}

void WarmPool::Reclaim(std::unique_lock<std::mutex>& lock) {
  if (!capacity_ || capacity_->stats().waiting == 0) return;
  for (auto& [id, p] : pools_) {
    if (p.ready.empty()) continue;
    PooledCopy copy = std::move(p.ready.back());
    p.ready.pop_back();
    p.retry_ms = MonotonicNowMs() + 1000;  // not refilled while creates wait
    lock.unlock();
    LogInfo("a pooled copy gives its room to a waiting create",
            {{"snapshotId", id}, {"sandboxId", copy.id}});
    Destroy({std::move(copy)});
    lock.lock();
    return;
  }
}

void WarmPool::FillLoop(std::stop_token stop) {
  std::unique_lock lock(mu_);
  for (;;) {
    // At most kFillers restores at a time, so a refill cannot take every
    // core from live sandboxes.
    std::string want;
    auto wanted = [&] {
      int64_t now = MonotonicNowMs();
      for (auto& [id, p] : pools_) {
        if (static_cast<int>(p.ready.size()) + p.filling < p.size && p.retry_ms <= now) {
          want = id;
          return true;
        }
      }
      return false;
    };
    // Woken by a change, and twice a second to give room back to waiting
    // creates and to retry pools that found none.
    Reclaim(lock);
    if (stop.stop_requested()) return;
    if (!cv_.wait_for(lock, stop, std::chrono::milliseconds(500), wanted)) continue;
    if (stop.stop_requested()) return;
    auto rec = snapshots_.Get(want);
    Shape shape = rec ? rec->shape : Shape{};
    if (rec && capacity_ && !capacity_->TakeForPool(shape)) {
      pools_[want].retry_ms = MonotonicNowMs() + 1000;  // no room now: not before a second
      continue;
    }
    pools_[want].filling++;
    lock.unlock();
    Status error(Code::kSnapshotNotFound, "snapshot is gone");
    std::shared_ptr<engine::AgentChannel> conn;
    engine::CreateParams params{NewUuid(), shape,
                                rec && !rec->rootfs.empty() ? rec->rootfs : rootfs_};
    if (rec) error = snapshots_.Verify(want);
    if (error.ok()) {
      // No warm-up command: it would advance the copy's pid counter, and a
      // pooled copy must be exactly as fresh as a direct restore.
      auto restored = StartCopy(engine_, params, *rec, snapshots_.CheckpointDir(want));
      if (restored.ok()) {
        conn = std::move(*restored);
      } else {
        error = restored.status();
      }
    }
    lock.lock();
    Pool& p = pools_[want];
    p.filling--;
    if (conn && p.size > static_cast<int>(p.ready.size())) {
      // Copies behind the first are frozen while they wait: an idle gVisor
      // sandbox costs ~5% of a core here (its platform polls every 400 us),
      // a frozen one nothing. The first stays thawed for a prompt hand-out.
      bool frozen = !p.ready.empty() && engine_.Freeze(params.id);
      p.ready.push_back(PooledCopy{params.id, conn, frozen, shape});
      continue;
    }
    if (conn) {  // the pool shrank meanwhile
      lock.unlock();
      Destroy({PooledCopy{params.id, conn, false, shape}});
      lock.lock();
    } else {
      if (rec && capacity_) capacity_->ReleasePool(shape);
      LogWarn("pool refill failed", {{"snapshotId", want}, {"error", error.ToString()}});
      p.size = 0;  // do not spin on a broken snapshot
    }
    if (p.size == 0 && p.filling == 0 && p.ready.empty()) pools_.erase(want);
  }
}

}  // namespace kiln::control
