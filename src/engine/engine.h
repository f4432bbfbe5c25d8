// The isolation engine: what kilnd needs from whatever runs a sandbox.
// gVisor (runsc) implements it today; a KVM microVM engine can implement it
// on hosts with hardware virtualization without touching the API or the
// control plane.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/run_as.h"
#include "common/shape.h"
#include "common/status.h"
#include "engine/agent_channel.h"

namespace kiln::engine {

// CPU weight against other sandboxes when the host is busy. A copy
// restored from a snapshot (an episode's reset) starts at kStartupCpuWeight,
// so that its restore and first command are not queued behind the commands
// of every running episode; the control plane sets kCpuWeight after that
// first command or a small amount of CPU. Fresh creates start at kCpuWeight:
// a grader's burst of new sandboxes must not crowd out the ones running
// cases against a timeout. Weights change no cap (the vcpu quota).
inline constexpr int kCpuWeight = 1024;
inline constexpr int kStartupCpuWeight = 8192;
// A warm pool's copy while it is restored and waits: a refill takes the CPU
// that running sandboxes leave. Raised to kStartupCpuWeight at hand-out.
inline constexpr int kPoolCpuWeight = 64;

struct CreateParams {
  std::string id;
  Shape shape;
  std::string rootfs;  // read-only image root; writes stay in the sandbox
  int cpu_weight = kCpuWeight;
  RunAs run_as;  // the agent gets it as KILN_RUN_AS; a restored agent keeps its own
  // Create only: a tar in ExportUpper's form that the new sandbox's root
  // overlay starts with (a disk snapshot's files). The engine keeps a link
  // to it in the sandbox's directory; a restore never takes one.
  std::string rootfs_upper_tar;
  // A warm pool's copy: restored at kPoolCpuWeight, not kStartupCpuWeight.
  bool background = false;
};

struct CheckpointStats {
  int64_t duration_ms = 0;  // the sandbox is paused for (at most) this long
  uint64_t bytes = 0;       // size of the checkpoint files
};

struct Usage {
  uint64_t cpu_ns = 0;        // CPU time consumed, measured by the host
  uint64_t memory_bytes = 0;  // current host memory of the sandbox
};

// What the meter reads beside Usage, once an interval (dearer to read:
// not for the hot paths that read Usage).
struct StorageUsage {
  uint64_t memory_cache_bytes = 0;  // of Usage::memory_bytes, page cache
  uint64_t disk_bytes = 0;          // its root's upper layer, as stored on the host
};

// What runs the sandboxes, for `kilnd --version`, health and metrics.
struct EngineInfo {
  std::string name;            // "gvisor"
  std::string binary;          // e.g. the runsc path
  std::string version;         // what the binary reports ("" if it cannot run)
  std::string pinned_version;  // what this build of kiln was made and tested with
  bool pinned() const { return !version.empty() && version == pinned_version; }
};

class Engine {
 public:
  virtual ~Engine() = default;

  virtual EngineInfo Info() const = 0;

  // Starts a sandbox and returns the channel to its agent; on failure
  // (kStartupFailed) nothing of it is left behind.
  virtual Result<std::shared_ptr<AgentChannel>> Create(const CreateParams& params) = 0;

  // Stops a sandbox and removes every trace of it on the host: processes,
  // cgroups, mounts, its directory. Idempotent.
  virtual void Destroy(const std::string& id) = 0;

  // Captures a running sandbox -- files, memory, processes -- into `dir`
  // (which must not exist). The sandbox is paused while capturing and then
  // continues. On failure (kSnapshotFailed) nothing is left in `dir` and it
  // keeps running.
  virtual Result<CheckpointStats> Checkpoint(const std::string& id, const std::string& dir) = 0;

  // Starts a new sandbox from a checkpoint: the same files, processes and
  // memory, with an agent channel of its own.
  virtual Result<std::shared_ptr<AgentChannel>> Restore(const CreateParams& params,
                                                        const std::string& dir) = 0;

  // Reconnects to a sandbox that kept running while no daemon held its
  // channel (after a kilnd restart). kNotRunning if it is gone.
  virtual Result<std::shared_ptr<AgentChannel>> Attach(const std::string& id,
                                                       const Shape& shape) = 0;

  // Writes what the sandbox changed in its root filesystem (its overlay's
  // upper layer) to `tar_path` as a tar in overlayfs form: a deleted path is
  // a 0/0 character device, a directory that hides its lower one carries
  // the xattr trusted.overlay.opaque=y. An image build's step is this.
  virtual Status ExportUpper(const std::string& id, const std::string& tar_path) = 0;

  // Sets the sandbox's CPU weight (see kCpuWeight).
  virtual void SetCpuWeight(const std::string& id, int weight) = 0;

  virtual Usage GetUsage(const std::string& id) = 0;
  virtual StorageUsage GetStorageUsage(const std::string& id) = 0;

  // Ids of sandboxes the engine has on this host (running or not).
  virtual std::vector<std::string> List() = 0;
};

}  // namespace kiln::engine
