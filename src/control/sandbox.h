// A sandbox as the control plane sees it: its record, kept current under a
// lock (every method is thread-safe), its agent channel while it runs, and
// its egress gate.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
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
  const SandboxSpec& spec() const { return spec_; }

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
  // -> stopping. False if it was already stopping or stopped.
  bool MarkStopping(const std::string& reason);
  // -> stopped; closes its channel.
  void MarkStopped(int64_t now_ms);

  Meter meter() const;
  void SetMeter(const Meter& m);

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
  const SandboxSpec spec_;
  mutable std::mutex mu_;
  SandboxRecord record_;  // id and spec are copies of the above
  std::shared_ptr<engine::AgentChannel> channel_;
  std::shared_ptr<egress::Gate> gate_;
  std::atomic<bool> boosted_{false};
  std::atomic<uint64_t> boost_base_cpu_ns_{0};
};

}  // namespace kiln::control
