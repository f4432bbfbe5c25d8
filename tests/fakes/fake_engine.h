// Test-only: an isolation engine that keeps its sandboxes in memory, for
// testing the control plane without root, runsc or a kernel (see
// docs/guide.md, "Testing the core without root").
//
// After LevelDB's FaultInjectionTestEnv: the real interface, with knobs a
// test turns to make the next calls fail, slow restores down, leave
// sandboxes behind as a previous daemon would, advance a sandbox's CPU or
// make it die; and a record of the calls the control plane made.
//
// Each sandbox's agent is a FakeAgentChannel (answers ping). Checkpoint
// writes a small file into the directory it is given, so the real
// SnapshotStore seals and verifies it; Restore refuses a directory that
// does not exist.
//
// Not modelled: runsc's timing (a create or restore is instant unless a
// delay is set), cgroups (usage is what the test says), memory limits, the
// OCI spec, the network.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "fakes/fake_agent.h"

namespace kiln::fakes {

class FakeEngine : public engine::Engine {
 public:
  // What the control plane asked of the engine, in call order.
  struct Calls {
    std::vector<std::string> created;   // ids, successful or not
    std::vector<std::string> restored;  // ids, successful or not (counted at entry)
    std::vector<std::string> restore_dirs;
    std::vector<std::string> upper_tars;    // each Create's rootfs_upper_tar ("" for none)
    std::vector<std::string> checkpointed;  // ids
    std::vector<std::string> attached;      // ids, successful or not
    std::vector<std::string> destroyed;
    std::vector<std::pair<std::string, int>> cpu_weights;  // SetCpuWeight
  };

  FakeEngine() = default;
  ~FakeEngine() override;

  // ---- engine::Engine ----
  engine::EngineInfo Info() const override;
  Result<std::shared_ptr<engine::AgentChannel>> Create(const engine::CreateParams& params) override;
  // The sandbox dies (channel closed) and is forgotten. Idempotent.
  void Destroy(const std::string& id) override;
  Result<engine::CheckpointStats> Checkpoint(const std::string& id,
                                             const std::string& dir) override;
  // Starts at engine::kStartupCpuWeight (a pool copy at kPoolCpuWeight), as
  // RunscEngine does.
  Result<std::shared_ptr<engine::AgentChannel>> Restore(const engine::CreateParams& params,
                                                        const std::string& dir) override;
  // A fresh channel to a sandbox that runs; kNotRunning for one that died,
  // is half-made (AddOrphan) or unknown.
  Result<std::shared_ptr<engine::AgentChannel>> Attach(const std::string& id,
                                                       const Shape& shape) override;
  Status ExportUpper(const std::string& id, const std::string& tar_path) override;
  void SetCpuWeight(const std::string& id, int weight) override;
  engine::Usage GetUsage(const std::string& id) override;
  engine::StorageUsage GetStorageUsage(const std::string&) override { return {}; }
  std::vector<std::string> List() override;

  // ---- knobs ----
  // The next n calls fail with `why` (each call takes one).
  void FailNextCreates(int n, Status why = Status(Code::kStartupFailed, "fake: create failed"));
  void FailNextRestores(int n, Status why = Status(Code::kStartupFailed, "fake: restore failed"));
  void FailNextCheckpoints(int n,
                           Status why = Status(Code::kSnapshotFailed, "fake: checkpoint failed"));
  // How long each Restore takes (before it succeeds or fails).
  void SetRestoreDelay(std::chrono::milliseconds delay);
  // A sandbox a previous daemon left running: listed, and Attach succeeds.
  void AddRunning(const std::string& id);
  // A sandbox a previous daemon left half-made: listed, Attach fails.
  void AddOrphan(const std::string& id);
  // Host-measured usage of a sandbox.
  void AddCpu(const std::string& id, uint64_t ns);
  void SetMemory(const std::string& id, uint64_t bytes);
  // The sandbox exits on its own (gVisor died): its channel closes and its
  // OnClose callback runs, on this thread. It stays listed, not attachable,
  // until destroyed. False if unknown.
  bool Kill(const std::string& id);
  // Runs for every channel handed out (Create, Restore, Attach) before it
  // is returned, e.g. to install agent handlers.
  void OnNewChannel(std::function<void(const std::string& id, FakeAgentChannel&)> setup);

  // ---- observations ----
  Calls calls() const;
  // The channel last handed out for `id` (also after it ended), or null.
  std::shared_ptr<FakeAgentChannel> channel(const std::string& id) const;
  bool Has(const std::string& id) const;  // listed now
  std::optional<int> CpuWeight(const std::string& id) const;

 private:
  struct Box {
    bool attachable = true;  // false: half-made, or died
    int cpu_weight = engine::kCpuWeight;
    uint64_t cpu_ns = 0;
    uint64_t memory_bytes = 0;
    std::shared_ptr<FakeAgentChannel> channel;
  };
  // A new channel for `id`, set up; called without the lock.
  std::shared_ptr<FakeAgentChannel> NewChannel(const std::string& id);
  // Takes one failure of `left`, if any.
  static std::optional<Status> TakeFailure(int* left, const Status& why);

  mutable std::mutex mu_;
  std::map<std::string, Box> boxes_;
  std::map<std::string, std::shared_ptr<FakeAgentChannel>> channels_;  // last handed out
  Calls calls_;
  int fail_creates_ = 0, fail_restores_ = 0, fail_checkpoints_ = 0;
  Status create_error_, restore_error_, checkpoint_error_;
  std::chrono::milliseconds restore_delay_{0};
  int checkpoints_ = 0;
  std::function<void(const std::string&, FakeAgentChannel&)> setup_;
};

// Polls `pred` every few milliseconds until it holds or `timeout` passes;
// returns its last value.
bool WaitUntil(const std::function<bool()>& pred,
               std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

}  // namespace kiln::fakes
