#include "control/sandbox.h"

#include <algorithm>

namespace kiln::control {

Sandbox::Sandbox(std::string id, SandboxSpec spec, int64_t created_ms)
    : id_(std::move(id)), spec_(std::move(spec)) {
  record_.id = id_;
  record_.spec = spec_;
  record_.created_ms = created_ms;
  record_.expires_ms = created_ms + static_cast<int64_t>(spec_.timeout_seconds) * 1000;
  record_.network = spec_.network.value_or(network::Policy{});
  record_.network_updated_ms = created_ms;
}

Sandbox::Sandbox(SandboxRecord record)
    : id_(record.id), spec_(record.spec), record_(std::move(record)) {}

SandboxState Sandbox::state() const {
  std::lock_guard lock(mu_);
  return record_.state;
}

Status Sandbox::RequireRunning() const {
  std::lock_guard lock(mu_);
  if (record_.state == SandboxState::kRunning) return Status::Ok();
  return Status(Code::kNotRunning,
                "sandbox " + id_ + " is " + std::string(StateName(record_.state)));
}

int64_t Sandbox::expires_ms() const {
  std::lock_guard lock(mu_);
  return record_.expires_ms;
}

int64_t Sandbox::ready_ms() const {
  std::lock_guard lock(mu_);
  return record_.ready_ms;
}

std::shared_ptr<engine::AgentChannel> Sandbox::channel() const {
  std::lock_guard lock(mu_);
  return record_.state == SandboxState::kRunning ? channel_ : nullptr;
}

void Sandbox::MarkRunning(std::shared_ptr<engine::AgentChannel> channel, int64_t now_ms) {
  std::lock_guard lock(mu_);
  if (record_.state != SandboxState::kStarting && record_.state != SandboxState::kRunning) return;
  channel_ = std::move(channel);
  record_.state = SandboxState::kRunning;
  if (!record_.ready_ms) record_.ready_ms = now_ms;
}

int64_t Sandbox::Extend(int64_t seconds, int64_t now_ms, int64_t cap_ms) {
  std::lock_guard lock(mu_);
  record_.expires_ms =
      std::min(std::max(record_.expires_ms, now_ms) + seconds * 1000, now_ms + cap_ms);
  return record_.expires_ms;
}

bool Sandbox::MarkStopping(const std::string& reason) {
  std::lock_guard lock(mu_);
  if (record_.state == SandboxState::kStopping || record_.state == SandboxState::kStopped)
    return false;
  record_.state = SandboxState::kStopping;
  record_.stop_reason = reason;
  return true;
}

void Sandbox::MarkStopped(int64_t now_ms) {
  std::shared_ptr<engine::AgentChannel> channel;
  {
    std::lock_guard lock(mu_);
    record_.state = SandboxState::kStopped;
    record_.ended_ms = now_ms;
    channel = std::move(channel_);
  }
  if (channel) channel->Close();
}

Meter Sandbox::meter() const {
  std::lock_guard lock(mu_);
  return record_.meter;
}

void Sandbox::SetMeter(const Meter& m) {
  std::lock_guard lock(mu_);
  record_.meter = m;
}

network::Policy Sandbox::network() const {
  std::lock_guard lock(mu_);
  return record_.network;
}

int64_t Sandbox::SetNetwork(const network::Policy& policy, int64_t now_ms) {
  std::shared_ptr<egress::Gate> gate;
  int64_t version;
  {
    std::lock_guard lock(mu_);
    record_.network = policy;
    version = ++record_.network_version;
    record_.network_updated_ms = now_ms;
    gate = gate_;
  }
  if (gate) gate->SetPolicy(policy);
  return version;
}

void Sandbox::SetGate(std::shared_ptr<egress::Gate> gate) {
  std::lock_guard lock(mu_);
  gate_ = std::move(gate);
  if (gate_) gate_->SetPolicy(record_.network);
}

std::shared_ptr<egress::Gate> Sandbox::TakeGate() {
  std::lock_guard lock(mu_);
  return std::move(gate_);
}

SandboxRecord Sandbox::Record() const {
  std::lock_guard lock(mu_);
  return record_;
}

}  // namespace kiln::control
