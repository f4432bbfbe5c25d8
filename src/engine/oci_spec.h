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
};

// Memory the host cgroup allows beyond memoryMiB for gVisor itself. The
// sandbox's processes are held to memoryMiB by the memory guard; this is
// the backstop that no sandbox can pass.
int64_t HostMemoryLimitBytes(int memory_mib);

nlohmann::json BuildOciSpec(const CreateParams& params, const SpecPaths& paths);

}  // namespace kiln::engine
