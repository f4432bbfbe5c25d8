// The gVisor engine: one `runsc` sandbox per kiln sandbox.
//
// Layout under the state directory:
//   sandboxes/<id>/config.json   OCI bundle (root = the image, read-only)
//   sandboxes/<id>/kiln-agent.sha256  the agent build it runs (and so its
//                                checkpoints need: agent_binaries.h)
//   agents/<sha256>              each agent build sandboxes booted with
//   sandboxes/<id>/agent.in      FIFO: kilnd -> agent (the sandbox's stdin)
//   sandboxes/<id>/agent.out     FIFO: agent -> kilnd (the sandbox's stdout)
//   sandboxes/<id>/agent.err     FIFO: the sandbox's stderr (runsc's and the
//                                agent's), read into sandbox.log (capped:
//                                stderr_drain.h)
//   runsc/                       runsc's own state (--root); runsc pins the
//                                empty network namespace that every gofer
//                                joins at runsc/null-netns (a bind mount)
// cgroups: /sys/fs/cgroup/<controller>/kiln/<id>.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "engine/agent_binaries.h"
#include "engine/agent_conn.h"
#include "engine/engine.h"
#include "engine/memory_guard.h"
#include "engine/stderr_drain.h"

namespace kiln::engine {

struct RunscOptions {
  std::string state_dir;
  std::string runsc = "runsc";
  std::string platform = "systrap";
  std::string agent_binary;
  int start_timeout_ms = 30000;
  std::string pinned_version;  // the runsc version this kiln was built for
  // runsc create/restore processes at once; 0: two per host CPU. Past it a
  // launch waits for a slot, and the wait is not part of start_timeout_ms:
  // 64 restores at once on 2 busy cores each took past the timeout, and
  // were killed with nothing said (SandboxFusion's bench at concurrency 64).
  int max_starts = 0;
};

// The version a runsc binary reports ("runsc version X" -> "X"), or
// kStartupFailed saying what is wrong with it: not found, not executable,
// exited non-zero (with its stderr), killed, hung, or printed no version.
// kilnd refuses to start on any of these: the check costs one
// `runsc --version` (~10 ms), and a daemon that cannot start a single
// sandbox must not look healthy.
Result<std::string> ProbeRunsc(const std::string& runsc);

// ProbeRunsc's version, or "" if runsc cannot be run.
std::string RunscVersion(const std::string& runsc);

class RunscEngine : public Engine {
 public:
  // Asks the runsc binary for its version once.
  explicit RunscEngine(RunscOptions options);
  ~RunscEngine() override;

  // Removes what runsc shares between sandboxes on the host (the pinned
  // null network namespace mount). Call after every sandbox is destroyed;
  // idempotent; the destructor calls it too.
  void ReleaseSharedState();

  EngineInfo Info() const override { return info_; }
  Result<std::shared_ptr<AgentChannel>> Create(const CreateParams& params) override;
  Result<CheckpointStats> Checkpoint(const std::string& id, const std::string& dir) override;
  Result<std::shared_ptr<AgentChannel>> Restore(const CreateParams& params,
                                                const std::string& dir) override;
  void Destroy(const std::string& id) override;
  Result<std::shared_ptr<AgentChannel>> Attach(const std::string& id, const Shape& shape) override;
  Status ExportUpper(const std::string& id, const std::string& tar_path) override;
  void SetCpuWeight(const std::string& id, int weight) override;
  Usage GetUsage(const std::string& id) override;
  StorageUsage GetStorageUsage(const std::string& id) override;
  std::vector<std::string> List() override;

 private:
  std::string SandboxDir(const std::string& id) const;
  std::vector<std::string> RunscArgs() const;
  // Thaws the sandbox's cgroup v1 freezer and waits until the kernel says
  // so: a kilnd before 2026-12-03 froze waiting pool copies, and a frozen
  // task cannot act on SIGKILL, so Destroy thaws what it may re-adopt.
  bool Thaw(const std::string& id);
  // Writes the bundle and FIFOs, runs `runsc <verb...>` with them as the
  // sandbox's stdio, and connects to the agent.
  // `upper`: the spec's upper-tar annotation and the file behind it (see
  // runsc_engine.cc, "Upper tars").
  struct UpperTar {
    bool annotate = false;
    std::string source;  // linked (or copied) in; "" = an empty tar
  };
  // `agent`: the kiln-agent build it boots with (agent_binaries.h).
  Result<std::shared_ptr<AgentChannel>> Launch(const CreateParams& params,
                                               const std::vector<std::string>& verb,
                                               const UpperTar& upper,
                                               const std::optional<Sha256Digest>& agent);

  // Lifts the host cgroup's limit from memoryMiB (what runsc read to size
  // the Sentry) to memoryMiB plus gVisor's headroom.
  void RaiseMemoryLimit(const std::string& id, const Shape& shape);
  // Kills the sandbox's largest process when it goes over its memory.
  void GuardMemory(const std::string& id, const Shape& shape,
                   const std::shared_ptr<AgentChannel>& conn);
  // Sends SIGCONT to the sandbox's PID 1 when its agent stops answering
  // (see AgentConnection::OnSilence).
  void ContinueOnSilence(const std::string& id, AgentConnection& conn);

  RunscOptions opts_;
  AgentBinaries agents_;
  EngineInfo info_;
  // Launches holding a runsc start slot (opts_.max_starts).
  std::mutex starts_mu_;
  std::condition_variable starts_cv_;
  int starts_ = 0;
  MemoryGuard guard_;
  StderrDrain drain_;
};

}  // namespace kiln::engine
