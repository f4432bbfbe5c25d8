#include "control/sandbox.h"

#include <algorithm>

#include "common/time.h"

namespace kiln::control {

Sandbox::Sandbox(std::string id, SandboxSpec spec, int64_t created_ms) : id_(std::move(id)) {
  spec_versions_.push_back(std::move(spec));
  spec_ = &spec_versions_.back();
  record_.id = id_;
  record_.spec = spec_versions_.back();
  record_.created_ms = created_ms;
  record_.expires_ms = created_ms + static_cast<int64_t>(this->spec().timeout_seconds) * 1000;
  record_.network = this->spec().network.value_or(network::Policy{});
  record_.network_updated_ms = created_ms;
}

Sandbox::Sandbox(SandboxRecord record) : id_(record.id), record_(std::move(record)) {
  spec_versions_.push_back(record_.spec);
  spec_ = &spec_versions_.back();
}

bool Sandbox::UpdateSpec(SandboxSpec next) {
  std::lock_guard lock(mu_);
  if (spec_versions_.size() >= kMaxSpecVersions) return false;
  record_.spec = next;
  spec_versions_.push_back(std::move(next));  // a deque keeps older elements in place
  spec_ = &spec_versions_.back();
  return true;
}

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
  last_use_ms_ = now_ms;
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

std::optional<SandboxState> Sandbox::MarkStopping(const std::string& reason) {
  std::shared_ptr<engine::AgentChannel> channel;
  SandboxState st;
  {
    std::lock_guard lock(mu_);
    st = record_.state;
    if (st != SandboxState::kStarting && st != SandboxState::kRunning &&
        st != SandboxState::kPaused)
      return std::nullopt;
    record_.state = SandboxState::kStopping;
    record_.stop_reason = reason;
    channel = channel_;
  }
  // Nothing of the stop waits on the agent (root inside may have stopped
  // it): its channel ends now, and a write still waiting for it fails.
  if (channel) channel->Abort();
  return st;
}

bool Sandbox::MarkPausing() {
  std::lock_guard lock(mu_);
  if (record_.state != SandboxState::kRunning) return false;
  record_.state = SandboxState::kPausing;
  return true;
}

void Sandbox::MarkPauseFailed() {
  std::lock_guard lock(mu_);
  if (record_.state == SandboxState::kPausing) record_.state = SandboxState::kRunning;
}

void Sandbox::MarkCheckpointed(const std::string& checkpoint, const std::string& reason,
                               int64_t now_ms, int64_t expires_after_ms) {
  std::shared_ptr<engine::AgentChannel> channel;
  {
    std::lock_guard lock(mu_);
    record_.checkpoint = checkpoint;
    record_.stop_reason = reason;
    record_.paused_ms = now_ms;
    record_.paused_lease_ms = std::max<int64_t>(0, record_.expires_ms - now_ms);
    record_.paused_expires_ms = expires_after_ms ? now_ms + expires_after_ms : 0;
    channel = std::move(channel_);
  }
  if (channel) channel->Close();
}

void Sandbox::MarkPaused() {
  std::lock_guard lock(mu_);
  if (record_.state == SandboxState::kPausing && !record_.checkpoint.empty())
    record_.state = SandboxState::kPaused;
}

bool Sandbox::MarkResuming() {
  std::lock_guard lock(mu_);
  if (record_.state != SandboxState::kPaused) return false;
  record_.state = SandboxState::kResuming;
  return true;
}

void Sandbox::MarkWakeFailed() {
  std::lock_guard lock(mu_);
  if (record_.state == SandboxState::kResuming) record_.state = SandboxState::kPaused;
}

void Sandbox::MarkResumed(std::shared_ptr<engine::AgentChannel> channel, int64_t now_ms,
                          int64_t lease_ms) {
  std::lock_guard lock(mu_);
  channel_ = std::move(channel);
  record_.state = SandboxState::kRunning;
  record_.expires_ms = now_ms + lease_ms;
  record_.stop_reason.clear();
  record_.checkpoint.clear();
  record_.paused_ms = 0;
  record_.paused_lease_ms = 0;
  record_.paused_expires_ms = 0;
  last_use_ms_ = now_ms;
}

std::shared_ptr<void> Sandbox::Use(std::shared_ptr<Sandbox> sandbox, int64_t now_ms) {
  Sandbox* s = sandbox.get();
  ++s->in_use_;
  s->last_use_ms_ = now_ms;
  // The handle's deleter ends the use, and owns the sandbox until then.
  return std::shared_ptr<void>(s, [held = std::move(sandbox)](void*) {
    held->last_use_ms_ = StableNowMs();
    --held->in_use_;
  });
}

bool Sandbox::IdleFor(int64_t idle_ms, int64_t now_ms) const {
  if (in_use_ > 0) return false;
  int64_t last = last_use_ms_;
  if (last == 0) last = ready_ms();
  return now_ms - last >= idle_ms;
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

size_t Sandbox::NoteCrashAdoption(int64_t now_ms, int64_t window_ms) {
  std::lock_guard lock(mu_);
  std::erase_if(record_.crash_adoptions_ms, [&](int64_t t) { return t < now_ms - window_ms; });
  record_.crash_adoptions_ms.push_back(now_ms);
  return record_.crash_adoptions_ms.size();
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

void Sandbox::AddMetricSample(const MetricSample& sample) {
  std::lock_guard lock(metrics_mu_);
  metrics_.Add(sample);
}

std::vector<MetricPoint> Sandbox::Metrics(int64_t from_ms, int64_t to_ms, int64_t span_ms) const {
  std::lock_guard lock(metrics_mu_);
  return metrics_.Query(from_ms, to_ms, span_ms);
}

std::optional<MetricSample> Sandbox::LatestMetrics() const {
  std::lock_guard lock(metrics_mu_);
  return metrics_.Latest();
}

}  // namespace kiln::control
