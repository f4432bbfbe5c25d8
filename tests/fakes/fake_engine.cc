#include "fakes/fake_engine.h"

#include <filesystem>
#include <fstream>
#include <thread>

namespace kiln::fakes {

namespace fs = std::filesystem;
using engine::AgentChannel;

FakeEngine::~FakeEngine() = default;

engine::EngineInfo FakeEngine::Info() const {
  return {"fake", "/nonexistent/fake-engine", "fake-1", "fake-1"};
}

std::optional<Status> FakeEngine::TakeFailure(int* left, const Status& why) {
  if (*left <= 0) return std::nullopt;
  --*left;
  return why;
}

std::shared_ptr<FakeAgentChannel> FakeEngine::NewChannel(const std::string& id) {
  auto channel = std::make_shared<FakeAgentChannel>();
  std::function<void(const std::string&, FakeAgentChannel&)> setup;
  {
    std::lock_guard lock(mu_);
    setup = setup_;
  }
  if (setup) setup(id, *channel);
  return channel;
}

Result<std::shared_ptr<AgentChannel>> FakeEngine::Create(const engine::CreateParams& params) {
  {
    std::lock_guard lock(mu_);
    calls_.created.push_back(params.id);
    calls_.upper_tars.push_back(params.rootfs_upper_tar);
    if (auto failed = TakeFailure(&fail_creates_, create_error_)) return *failed;
  }
  auto channel = NewChannel(params.id);
  std::lock_guard lock(mu_);
  Box& box = boxes_[params.id];
  box = Box{};
  box.cpu_weight = params.cpu_weight;
  box.channel = channel;
  channels_[params.id] = channel;
  return std::shared_ptr<AgentChannel>(channel);
}

Result<std::shared_ptr<AgentChannel>> FakeEngine::Restore(const engine::CreateParams& params,
                                                          const std::string& dir) {
  std::optional<Status> failed;
  std::chrono::milliseconds delay;
  {
    std::lock_guard lock(mu_);
    calls_.restored.push_back(params.id);
    calls_.restore_dirs.push_back(dir);
    failed = TakeFailure(&fail_restores_, restore_error_);
    delay = restore_delay_;
  }
  if (delay.count() > 0) std::this_thread::sleep_for(delay);
  if (failed) return *failed;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Status(Code::kStartupFailed, "fake: no checkpoint at " + dir);
  auto channel = NewChannel(params.id);
  std::lock_guard lock(mu_);
  Box& box = boxes_[params.id];
  box = Box{};
  box.cpu_weight = params.background ? engine::kPoolCpuWeight : engine::kStartupCpuWeight;
  box.channel = channel;
  channels_[params.id] = channel;
  return std::shared_ptr<AgentChannel>(channel);
}

Result<std::shared_ptr<AgentChannel>> FakeEngine::Attach(const std::string& id, const Shape&) {
  {
    std::lock_guard lock(mu_);
    calls_.attached.push_back(id);
    auto it = boxes_.find(id);
    if (it == boxes_.end() || !it->second.attachable)
      return Status(Code::kNotRunning, "fake: " + id + " is not running");
  }
  auto channel = NewChannel(id);
  std::lock_guard lock(mu_);
  auto it = boxes_.find(id);
  if (it == boxes_.end()) return Status(Code::kNotRunning, "fake: " + id + " is gone");
  it->second.channel = channel;
  channels_[id] = channel;
  return std::shared_ptr<AgentChannel>(channel);
}

void FakeEngine::Destroy(const std::string& id) {
  std::shared_ptr<FakeAgentChannel> channel;
  {
    std::lock_guard lock(mu_);
    calls_.destroyed.push_back(id);
    auto it = boxes_.find(id);
    if (it == boxes_.end()) return;
    channel = std::move(it->second.channel);
    boxes_.erase(it);
  }
  // As when runsc kills the sandbox: the agent's end of the channel goes.
  if (channel) channel->Die();
}

bool FakeEngine::Kill(const std::string& id) {
  std::shared_ptr<FakeAgentChannel> channel;
  {
    std::lock_guard lock(mu_);
    auto it = boxes_.find(id);
    if (it == boxes_.end()) return false;
    it->second.attachable = false;
    channel = it->second.channel;
  }
  if (channel) channel->Die();
  return true;
}

Result<engine::CheckpointStats> FakeEngine::Checkpoint(const std::string& id,
                                                       const std::string& dir) {
  int n;
  {
    std::lock_guard lock(mu_);
    calls_.checkpointed.push_back(id);
    if (auto failed = TakeFailure(&fail_checkpoints_, checkpoint_error_)) return *failed;
    auto it = boxes_.find(id);
    if (it == boxes_.end() || !it->second.attachable)
      return Status(Code::kSnapshotFailed, "fake: " + id + " is not running");
    n = ++checkpoints_;
  }
  std::error_code ec;
  if (fs::exists(dir, ec)) return Status(Code::kSnapshotFailed, "fake: " + dir + " exists");
  fs::create_directories(dir, ec);
  if (ec) return Status(Code::kSnapshotFailed, "fake: " + ec.message());
  std::string content = "fake checkpoint " + std::to_string(n) + " of " + id + "\n";
  std::ofstream(dir + "/checkpoint.img", std::ios::binary) << content;
  return engine::CheckpointStats{1, content.size()};
}

Status FakeEngine::ExportUpper(const std::string& id, const std::string& tar_path) {
  // The fake has no filesystem (image builds are tested against runsc): a
  // running sandbox's "upper layer" is a file naming it.
  {
    std::lock_guard lock(mu_);
    auto it = boxes_.find(id);
    if (it == boxes_.end() || !it->second.attachable)
      return Status(Code::kIoError, "fake: no sandbox " + id);
  }
  std::ofstream out(tar_path, std::ios::binary);
  out << "fake upper of " << id;
  return out.good() ? Status::Ok() : Status(Code::kIoError, "fake: cannot write " + tar_path);
}

void FakeEngine::SetCpuWeight(const std::string& id, int weight) {
  std::lock_guard lock(mu_);
  calls_.cpu_weights.emplace_back(id, weight);
  if (auto it = boxes_.find(id); it != boxes_.end()) it->second.cpu_weight = weight;
}

engine::Usage FakeEngine::GetUsage(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = boxes_.find(id);
  if (it == boxes_.end()) return {};  // as a cgroup that is gone
  return {it->second.cpu_ns, it->second.memory_bytes};
}

std::vector<std::string> FakeEngine::List() {
  std::lock_guard lock(mu_);
  std::vector<std::string> ids;
  for (const auto& [id, box] : boxes_) ids.push_back(id);
  return ids;
}

void FakeEngine::FailNextCreates(int n, Status why) {
  std::lock_guard lock(mu_);
  fail_creates_ = n;
  create_error_ = std::move(why);
}

void FakeEngine::FailNextRestores(int n, Status why) {
  std::lock_guard lock(mu_);
  fail_restores_ = n;
  restore_error_ = std::move(why);
}

void FakeEngine::FailNextCheckpoints(int n, Status why) {
  std::lock_guard lock(mu_);
  fail_checkpoints_ = n;
  checkpoint_error_ = std::move(why);
}

void FakeEngine::SetRestoreDelay(std::chrono::milliseconds delay) {
  std::lock_guard lock(mu_);
  restore_delay_ = delay;
}

void FakeEngine::AddRunning(const std::string& id) {
  std::lock_guard lock(mu_);
  boxes_[id] = Box{};
}

void FakeEngine::AddOrphan(const std::string& id) {
  std::lock_guard lock(mu_);
  Box& box = boxes_[id];
  box = Box{};
  box.attachable = false;
}

void FakeEngine::AddCpu(const std::string& id, uint64_t ns) {
  std::lock_guard lock(mu_);
  if (auto it = boxes_.find(id); it != boxes_.end()) it->second.cpu_ns += ns;
}

void FakeEngine::SetMemory(const std::string& id, uint64_t bytes) {
  std::lock_guard lock(mu_);
  if (auto it = boxes_.find(id); it != boxes_.end()) it->second.memory_bytes = bytes;
}

void FakeEngine::OnNewChannel(std::function<void(const std::string&, FakeAgentChannel&)> setup) {
  std::lock_guard lock(mu_);
  setup_ = std::move(setup);
}

FakeEngine::Calls FakeEngine::calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

std::shared_ptr<FakeAgentChannel> FakeEngine::channel(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = channels_.find(id);
  return it == channels_.end() ? nullptr : it->second;
}

bool FakeEngine::Has(const std::string& id) const {
  std::lock_guard lock(mu_);
  return boxes_.count(id) > 0;
}

std::optional<int> FakeEngine::CpuWeight(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = boxes_.find(id);
  if (it == boxes_.end()) return std::nullopt;
  return it->second.cpu_weight;
}

bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace kiln::fakes
