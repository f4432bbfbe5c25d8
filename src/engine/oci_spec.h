// The OCI runtime spec (config.json) of a sandbox.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace kiln::engine {

struct SpecPaths {
  std::string rootfs;
  std::string agent_binary;  // bind-mounted read-only at /opt/kiln/kiln-agent
  std::string cgroup_path;   // e.g. /kiln/<id>
  // The upper-layer tar runsc unpacks into the root overlay at boot, as the
  // spec names it ("" = none). Relative to runsc's working directory (the
  // sandbox's own), so that every sandbox's spec says the same: runsc
  // refuses a restore whose annotations differ from the checkpoint's.
  std::string upper_tar;
};

// What the host cgroup allows once the sandbox runs: memoryMiB plus headroom
// for gVisor itself. The sandbox's processes are held to memoryMiB by the
// memory guard; this is the backstop that no sandbox can pass. (The spec
// itself says memoryMiB, which runsc reports to the Sentry as its total
// memory; the engine raises the limit to this when runsc returns.)
int64_t HostMemoryLimitBytes(int memory_mib);

nlohmann::json BuildOciSpec(const CreateParams& params, const SpecPaths& paths);

// The sandbox's disk: every write (the root, /workspace, /tmp alike) goes to
// an overlay whose upper layer is backed by a file runsc creates (and
// unlinks at once) in `sandbox_dir` on the host, capped at disk_mib: a full
// disk is ENOSPC inside, host disk outside, and part of every checkpoint.
std::string RootOverlayFlag(const std::string& sandbox_dir, int disk_mib);

}  // namespace kiln::engine
