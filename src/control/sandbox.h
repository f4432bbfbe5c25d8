// A sandbox as the control plane sees it: its record, kept current under a
// lock (every method is thread-safe), its agent channel while it runs, and
// its egress gate.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "control/metrics_history.h"
#include "control/sandbox_record.h"
#include "egress/egress.h"
#include "engine/agent_channel.h"
#include "network/policy.h"

namespace kiln::control {

class Sandbox {
 public:
  Sandbox(std::string id, SandboxSpec spec, int64_t created_ms);
  // A sandbox known from the durable table (kilnd restarted).
  explicit Sandbox(SandboxRecord record);

  const std::string& id() const { return id_; }
  // What it was asked for. :update publishes a new version; a version once
  // published never changes and lives as long as the sandbox, so a
  // reference taken here stays valid and consistent without a lock.
  const SandboxSpec& spec() const { return *spec_.load(); }
  // Publishes `next` as its spec (and in its record); false once it has had
  // kMaxSpecVersions versions (each is kept, see above).
  bool UpdateSpec(SandboxSpec next);
  static constexpr size_t kMaxSpecVersions = 100;

  SandboxState state() const;
  bool running() const { return state() == SandboxState::kRunning; }
  // OK while running; otherwise kNotRunning naming the state, so that every
  // operation that needs a running sandbox refuses in the same words.
  Status RequireRunning() const;
  int64_t expires_ms() const;
  int64_t ready_ms() const;
  // The channel to its agent, or null unless running.
  std::shared_ptr<engine::AgentChannel> channel() const;

  // starting -> running (again after a daemon restart: running -> running).
  void MarkRunning(std::shared_ptr<engine::AgentChannel> channel, int64_t now_ms);
  // Moves the lease end to max(expiresAt, now) + seconds, at most `cap_ms`
  // ahead of now. Returns the new end.
  int64_t Extend(int64_t seconds, int64_t now_ms, int64_t cap_ms);
  // -> stopping, from starting, running or paused: returns the state it
  // left, and its agent channel is aborted (AgentChannel::Abort). nullopt
  // otherwise (already stopping or stopped, or a pause or wake is under way).
  std::optional<SandboxState> MarkStopping(const std::string& reason);
  // running -> pausing; false if it was not running.
  bool MarkPausing();
  // pausing -> running: the capture failed, it still runs.
  void MarkPauseFailed();
  // Still pausing, now held by `checkpoint`, its lease clock stopped (the
  // time left is kept); closes its channel. `reason` is shown as stopReason
  // while paused (requested, idle, lease_expired, host_stopped). Recorded
  // so, a sandbox is paused to a restart whatever of it still runs.
  void MarkCheckpointed(const std::string& checkpoint, const std::string& reason, int64_t now_ms,
                        int64_t expires_after_ms);
  // pausing (checkpointed) -> paused, once nothing of it runs: a wake
  // before that would start a second sandbox under the same id.
  void MarkPaused();
  // paused -> resuming; false if it was not paused.
  bool MarkResuming();
  // resuming -> paused: the restore failed, the checkpoint is kept.
  void MarkWakeFailed();
  // resuming -> running on a new channel, with a lease of `lease_ms` from
  // now; forgets the checkpoint (the caller deletes it).
  void MarkResumed(std::shared_ptr<engine::AgentChannel> channel, int64_t now_ms, int64_t lease_ms);

  // API activity, for idle pause: Use() marks it in use until the returned
  // handle is dropped (a call, a stream, a terminal held open).
  // The handle keeps the sandbox alive.
  static std::shared_ptr<void> Use(std::shared_ptr<Sandbox> sandbox, int64_t now_ms);
  // True if nothing uses it and nothing did for `idle_ms`.
  bool IdleFor(int64_t idle_ms, int64_t now_ms) const;

  // Wakes it if it is paused (the manager's hook, set at tracking); OK if it
  // runs already. Used by calls that need its agent when autoWake is on.
  Status Wake() const { return waker_ ? waker_() : RequireRunning(); }
  void SetWaker(std::function<Status()> waker) { waker_ = std::move(waker); }
  // -> stopped; closes its channel.
  void MarkStopped(int64_t now_ms);
  // Notes a re-adoption after a crash of kilnd; returns how many there
  // were within `window_ms` (this one included).
  size_t NoteCrashAdoption(int64_t now_ms, int64_t window_ms);

  Meter meter() const;
  void SetMeter(const Meter& m);
  // Its resource use over time (the meter's readings while it runs).
  void AddMetricSample(const MetricSample& sample);
  std::vector<MetricPoint> Metrics(int64_t from_ms, int64_t to_ms, int64_t span_ms) const;
  std::optional<MetricSample> LatestMetrics() const;

  // Egress rules in force.
  network::Policy network() const;
  // Replaces the rules and applies them to the gate (if running) at once:
  // open connections the new rules refuse are cut. Returns the new version
  // (1 at start, +1 per change).
  int64_t SetNetwork(const network::Policy& policy, int64_t now_ms);
  // The egress gate of a running sandbox; Close() of the old one is the
  // caller's business.
  void SetGate(std::shared_ptr<egress::Gate> gate);
  std::shared_ptr<egress::Gate> TakeGate();

  // The start-up CPU weight of a restored copy (engine::kStartupCpuWeight):
  // begun at hand-out with the sandbox's CPU total then, which bounds how
  // much CPU it covers; EndStartupBoost is true once, when it is to end.
  void BeginStartupBoost(uint64_t cpu_ns) {
    boost_base_cpu_ns_ = cpu_ns;
    boosted_ = true;
  }
  bool EndStartupBoost() { return boosted_.exchange(false); }
  bool boosted() const { return boosted_; }
  uint64_t boost_base_cpu_ns() const { return boost_base_cpu_ns_; }

  // A consistent copy of its state: for the durable table and for answers.
  SandboxRecord Record() const;

 private:
  const std::string id_;
  std::deque<SandboxSpec> spec_versions_;  // under mu_; never erased
  std::atomic<const SandboxSpec*> spec_;
  mutable std::mutex mu_;
  SandboxRecord record_;  // id and spec are copies of the above
  std::shared_ptr<engine::AgentChannel> channel_;
  std::shared_ptr<egress::Gate> gate_;
  mutable std::mutex metrics_mu_;  // apart from mu_: a query copies points
  MetricsHistory metrics_;
  std::atomic<bool> boosted_{false};
  std::atomic<uint64_t> boost_base_cpu_ns_{0};
  std::atomic<int> in_use_{0};
  std::atomic<int64_t> last_use_ms_{0};
  std::function<Status()> waker_;  // set once, before the sandbox is shared
};

}  // namespace kiln::control
