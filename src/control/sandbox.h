// A sandbox as the control plane sees it: its record and its agent channel.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "egress/egress.h"
#include "engine/agent_conn.h"
#include "engine/engine.h"
#include "network/policy.h"

namespace kiln::control {

struct SandboxSpec {
  std::string owner;  // the API key that created it
  engine::Shape shape;
  int timeout_seconds = 1800;
  std::optional<int64_t> max_cost_micros;
  std::optional<std::string> name;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> env;
  std::optional<std::string> snapshot;  // start from this snapshot (its shape wins)
  // Egress rules; unset = the snapshot's (for a copy) or internet off.
  std::optional<network::Policy> network;
};

// Why an operation failed, in the API's terms.
struct Failure {
  int status = 500;
  std::string code = "internal_error";
  std::string message;
  int retry_after_s = 0;  // for conditions that clear on their own
};

class Sandbox {
 public:
  Sandbox(std::string id, SandboxSpec spec, int64_t created_ms);

  const std::string& id() const { return id_; }
  const SandboxSpec& spec() const { return spec_; }

  std::string state() const;
  bool running() const { return state() == "running"; }
  int64_t expires_ms() const;
  // The channel to its agent, or null unless running.
  std::shared_ptr<engine::AgentConnection> conn() const;

  void MarkRunning(std::shared_ptr<engine::AgentConnection> conn, int64_t now_ms);
  // Moves the lease end to max(expiresAt, now) + seconds, at most `cap_ms`
  // ahead of now. Returns the new end.
  int64_t Extend(int64_t seconds, int64_t now_ms, int64_t cap_ms);
  // Returns false if it was already stopping or stopped.
  bool MarkStopping(const std::string& reason);
  void MarkStopped(int64_t now_ms);

  // Metering: adds one interval's usage. `cpu_ns` is the cgroup's total.
  struct Meter {
    uint64_t cpu_ns = 0;  // cgroup CPU total at the last reading
    int64_t at_ms = 0;    // when it was read
    double cpu_seconds = 0, gib_hours = 0, micros = 0;
  };
  Meter meter() const;
  void SetMeter(const Meter& m);

  // Egress rules in force and their version (1 at start, +1 per change).
  network::Policy network() const;
  // Replaces the rules and applies them to the gate (if running) at once:
  // open connections the new rules refuse are cut. Returns the new version.
  int64_t SetNetwork(const network::Policy& policy, int64_t now_ms);
  // The API's NetworkPolicy.
  nlohmann::json NetworkInfo() const;
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

  // SandboxInfo, as the API answers it.
  nlohmann::json Info() const;

  // The durable record (spec with env values, times, meter), and back.
  nlohmann::json Record() const;
  static std::shared_ptr<Sandbox> FromRecord(const nlohmann::json& record);
  int64_t ended_ms() const;
  int64_t ready_ms() const;

 private:
  const std::string id_;
  const SandboxSpec spec_;
  mutable std::mutex mu_;
  std::string state_ = "starting";
  int64_t created_ms_;
  int64_t ready_ms_ = 0;
  int64_t expires_ms_;
  int64_t ended_ms_ = 0;
  std::string stop_reason_;
  Meter meter_;
  std::shared_ptr<engine::AgentConnection> conn_;
  network::Policy network_;
  int64_t network_version_ = 1;
  int64_t network_updated_ms_;
  std::shared_ptr<egress::Gate> gate_;
  std::atomic<bool> boosted_{false};
  std::atomic<uint64_t> boost_base_cpu_ns_{0};
};

}  // namespace kiln::control
