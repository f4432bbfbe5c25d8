#include "control/warm_pool.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/ids.h"
#include "common/log.h"
#include "common/time.h"
#include "control/snapshot_copy.h"

namespace kiln::control {

namespace {
// A pooled copy restored before the host clock stepped by more than this is
// discarded at hand-out.
constexpr int64_t kMaxClockStepMs = 1000;

WarmPoolOptions WithDefaults(WarmPoolOptions o) {
  if (!o.wall_offset_ms) o.wall_offset_ms = [] { return NowMs() - MonotonicNowMs(); };
  return o;
}
}  // namespace

WarmPool::WarmPool(engine::Engine& engine, std::string rootfs, store::SnapshotStore& snapshots,
                   WarmPoolOptions options, Capacity* capacity)
    : engine_(engine),
      capacity_(capacity),
      rootfs_(std::move(rootfs)),
      snapshots_(snapshots),
      options_(WithDefaults(std::move(options))),
      sizer_(options_.sizer) {
  for (int i = 0; i < kFillers; ++i)
    fillers_.emplace_back([this](std::stop_token stop) { FillLoop(stop); });
}

WarmPool::~WarmPool() {
  for (auto& t : fillers_) t.request_stop();
  fillers_.clear();  // joins
  std::lock_guard lock(mu_);
  for (auto& [id, p] : pools_) Destroy(std::move(p.ready));
}

void WarmPool::Resize(const std::string& snapshot_id, std::optional<int> size) {
  std::deque<PooledCopy> extra;
  {
    std::lock_guard lock(mu_);
    Pool& p = pools_[snapshot_id];
    p.pinned = size;
    p.failures = 0;
    p.retry_ms = 0;
    p.size = size ? *size : p.plan.size;
    SavePinsLocked();
    extra = TrimLocked(snapshot_id);
  }
  cv_.notify_all();
  Destroy(std::move(extra));
}

void WarmPool::Arrived(const std::string& snapshot_id, bool image_warm) {
  if (!options_.adaptive) return;
  std::deque<PooledCopy> extra;
  {
    std::lock_guard lock(mu_);
    sizer_.Arrived(snapshot_id, MonotonicNowMs(), image_warm);
    extra = AdaptLocked(MonotonicNowMs());
  }
  cv_.notify_all();
  Destroy(std::move(extra));
}

std::deque<PooledCopy> WarmPool::TrimLocked(const std::string& id) {
  std::deque<PooledCopy> extra;
  auto it = pools_.find(id);
  if (it == pools_.end()) return extra;
  Pool& p = it->second;
  while (static_cast<int>(p.ready.size()) > p.size) {
    extra.push_back(std::move(p.ready.back()));
    p.ready.pop_back();
  }
  if (p.size == 0 && p.filling == 0 && p.ready.empty() && !p.pinned && p.plan.demand == 0)
    pools_.erase(it);
  return extra;
}

std::deque<PooledCopy> WarmPool::AdaptLocked(int64_t now_ms) {
  std::deque<PooledCopy> extra;
  if (!options_.adaptive) return extra;
  std::map<std::string, PoolPlan> plan = sizer_.Plan(now_ms);
  for (const auto& [id, p] : plan) pools_[id];  // a pool for every demand
  std::vector<std::string> ids;
  for (auto& [id, p] : pools_) {
    auto found = plan.find(id);
    p.plan = found == plan.end() ? PoolPlan{} : found->second;
    if (!p.pinned) p.size = p.plan.size;
    ids.push_back(id);
  }
  for (const auto& id : ids) {
    auto trimmed = TrimLocked(id);
    for (auto& c : trimmed) extra.push_back(std::move(c));
  }
  return extra;
}

void WarmPool::LoadPins() {
  if (options_.pins_path.empty()) return;
  std::lock_guard lock(mu_);
  std::ifstream in(options_.pins_path);
  if (!in) return;
  auto pins = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!pins.is_object()) {
    LogWarn("ignoring an unreadable pool pins file", {{"path", options_.pins_path}});
    return;
  }
  for (const auto& [id, size] : pins.items()) {
    // Only the pins of snapshots that are still here, at a sane size.
    if (!size.is_number_integer() || size.get<int64_t>() < 0 || size.get<int64_t>() > 1000 ||
        !snapshots_.Get(id))
      continue;
    Pool& p = pools_[id];
    p.pinned = size.get<int>();
    p.size = *p.pinned;
  }
  cv_.notify_all();
}

void WarmPool::SavePinsLocked() {
  if (options_.pins_path.empty()) return;
  nlohmann::json pins = nlohmann::json::object();
  for (const auto& [id, p] : pools_)
    if (p.pinned) pins[id] = *p.pinned;
  // Written whole and renamed: a crash leaves the old file or the new one.
  std::string tmp = options_.pins_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << pins.dump() << "\n";
    if (!out.flush()) {
      LogWarn("could not save pool pins", {{"path", tmp}});
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, options_.pins_path, ec);
  if (ec)
    LogWarn("could not save pool pins", {{"path", options_.pins_path}, {"error", ec.message()}});
}

std::optional<PooledCopy> WarmPool::Take(const std::string& snapshot_id, const std::string& key) {
  for (;;) {
    PooledCopy copy;
    {
      std::lock_guard lock(mu_);
      auto it = pools_.find(snapshot_id);
      if (it == pools_.end() || it->second.ready.empty()) return std::nullopt;
      copy = std::move(it->second.ready.front());
      it->second.ready.pop_front();
    }
    cv_.notify_all();  // refill in the background
    // Handed out once, and only alive. Both checks are the host's: a ping
    // would wake the copy only for the create's first command to wake it
    // again (each wake after a wait costs 5-30 ms of gVisor's CPU here).
    if (!copy.channel->alive()) {
      LogWarn("discarding a pooled copy whose sandbox stopped", {{"sandboxId", copy.id}});
      Destroy({std::move(copy)});
      continue;
    }
    // gVisor read the host's clock at restore and keeps counting from it: a
    // host clock step while the copy waited left it on the old time, which
    // a direct restore would not read.
    int64_t step = options_.wall_offset_ms() - copy.wall_offset_ms;
    if (step > kMaxClockStepMs || step < -kMaxClockStepMs) {
      LogWarn("discarding a pooled copy restored before the host clock stepped",
              {{"sandboxId", copy.id}, {"stepMs", step}});
      Destroy({std::move(copy)});
      continue;
    }
    // It waited at the pool's weight; handed out, it starts as any restore.
    engine_.SetCpuWeight(copy.id, engine::kStartupCpuWeight);
    // Handed out: its room is now the key's.
    if (capacity_) capacity_->HandOut(key, copy.shape);
    return copy;
  }
}

PoolStatus WarmPool::StatusOf(const std::string& snapshot_id) {
  PoolStatus s;
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mu_);
    auto it = pools_.find(snapshot_id);
    if (it == pools_.end()) return s;
    const Pool& p = it->second;
    s.size = p.size;
    s.ready = static_cast<int>(p.ready.size());
    s.pinned = p.pinned.has_value();
    s.wanted = p.pinned ? *p.pinned : p.plan.demand;
    if (p.failures > 0)
      s.unfilled_reason = "restore_failed";
    else if (p.no_room)
      s.unfilled_reason = "no_capacity";
    else if (!p.pinned && p.plan.limit == PoolLimit::kBudget)
      s.unfilled_reason = "memory_budget";
    else if (!p.pinned && p.plan.limit == PoolLimit::kMaxSize)
      s.unfilled_reason = "max_size";
    for (const auto& c : p.ready) ids.push_back(c.id);
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
    bool was_pinned = it->second.pinned.has_value();
    it->second.pinned.reset();
    it->second.plan = {};
    sizer_.Forget(snapshot_id);
    if (it->second.filling == 0) pools_.erase(it);
    if (was_pinned) SavePinsLocked();
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
  int64_t adapted_ms = 0;
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
    // creates, to retry pools that found none and to follow demand (idle
    // pools shrink).
    Reclaim(lock);
    if (stop.stop_requested()) return;
    if (int64_t now = MonotonicNowMs(); now - adapted_ms >= 500) {
      adapted_ms = now;
      auto extra = AdaptLocked(now);
      if (!extra.empty()) {
        lock.unlock();
        Destroy(std::move(extra));
        lock.lock();
      }
    }
    if (!cv_.wait_for(lock, stop, std::chrono::milliseconds(500), wanted)) continue;
    if (stop.stop_requested()) return;
    auto rec = snapshots_.Get(want);
    Shape shape = rec ? rec->shape : Shape{};
    if (rec && capacity_ && !capacity_->TakeForPool(shape)) {
      Pool& p = pools_[want];
      p.retry_ms = MonotonicNowMs() + 1000;  // no room now: not before a second
      p.no_room = true;
      continue;
    }
    pools_[want].filling++;
    lock.unlock();
    Status error(Code::kSnapshotNotFound, "snapshot is gone");
    std::shared_ptr<engine::AgentChannel> conn;
    engine::CreateParams params{NewUuid(), shape,
                                rec && !rec->rootfs.empty() ? rec->rootfs : rootfs_};
    // Restored at the pool's weight: a refill takes what running sandboxes
    // leave (engine::kPoolCpuWeight).
    params.background = true;
    int64_t started_ms = MonotonicNowMs();
    // Taken before the restore reads the host's clock: a step during the
    // restore discards the copy rather than letting an old time through.
    int64_t restored_offset_ms = options_.wall_offset_ms();
    if (rec) error = snapshots_.Verify(want);
    if (error.ok()) {
      // Warmed as every copy is (StartCopy): a pooled copy is exactly what
      // a direct restore gives.
      auto restored =
          StartCopy(engine_, params, *rec, snapshots_.CheckpointDir(want), options_.warm_copies);
      if (restored.ok()) {
        conn = std::move(*restored);
      } else {
        error = restored.status();
      }
    }
    int64_t restore_ms = MonotonicNowMs() - started_ms;
    uint64_t bytes = conn ? engine_.GetUsage(params.id).memory_bytes : 0;
    lock.lock();
    Pool& p = pools_[want];
    p.filling--;
    if (conn) {
      p.failures = 0;
      p.no_room = false;
      sizer_.Restored(want, restore_ms, bytes);
    }
    if (conn && p.size > static_cast<int>(p.ready.size())) {
      // Copies wait running, never frozen: a copy frozen by the cgroup
      // freezer and thawed at hand-out lost its agent (SIGKILL or SIGSEGV
      // inside gVisor) on its first command in 8 of 1,830 hand-outs of
      // bursts of 30; none unfrozen. A waiting copy costs ~3 ms/s of CPU.
      p.ready.push_back(PooledCopy{params.id, conn, shape, restored_offset_ms});
      continue;
    }
    if (conn) {  // the pool shrank meanwhile
      lock.unlock();
      Destroy({PooledCopy{params.id, conn, shape}});
      lock.lock();
    } else {
      if (rec && capacity_) capacity_->ReleasePool(shape);
      // Retried after 1 s, doubling to a minute: a broken snapshot costs a
      // restore a minute, and a passing failure heals by itself.
      p.failures++;
      p.retry_ms = MonotonicNowMs() + (int64_t{1000} << std::min(p.failures - 1, 6));
      LogWarn("pool refill failed", {{"snapshotId", want},
                                     {"error", error.ToString()},
                                     {"failures", p.failures},
                                     {"retryInMs", p.retry_ms - MonotonicNowMs()}});
      if (!rec) {  // the snapshot is gone: so is its pool
        p.size = 0;
        p.pinned.reset();
        p.plan = {};
        sizer_.Forget(want);
        SavePinsLocked();
      }
    }
    auto extra = TrimLocked(want);
    if (!extra.empty()) {
      lock.unlock();
      Destroy(std::move(extra));
      lock.lock();
    }
  }
}

}  // namespace kiln::control
