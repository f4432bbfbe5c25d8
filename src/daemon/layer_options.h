// kilnd's flags read into the options of each layer it builds: what a flag
// means for capacity, pools, images, ports and the server is said once,
// here, and main() only wires the layers together.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/context.h"
#include "api/http_server.h"
#include "api/sandboxfusion/sandboxfusion.h"
#include "control/sandbox_manager.h"
#include "daemon/flags.h"
#include "egress/egress.h"
#include "images/manager/front_images.h"
#include "images/manager/image_manager.h"

namespace kiln::daemon {

// Fills the paths the flags leave empty from where kilnd runs: the image
// directory under the state directory, kiln-agent beside kilnd, the base
// image's recipe and the console's bundle in the tree kilnd was built in.
void FillDefaultPaths(Flags* flags);

// The host's room for sandboxes: memory, CPUs and the state disk measured
// unless a flag names them, with the overcommit factors and per-key caps.
control::CapacityLimits CapacityLimitsFrom(const Flags& flags);

// The warm pools' memory budget in MiB: --pool-memory-mib, or a 16th of
// the host's memory for sandboxes (0: pools by demand are off).
int64_t PoolMemoryMib(const Flags& flags, const control::CapacityLimits& limits);

// The sandbox manager's options: pools, metering and prices. Throws
// std::invalid_argument naming the file when --prices is not a price table.
control::ManagerOptions ManagerOptionsFrom(const Flags& flags,
                                           const control::CapacityLimits& limits);

// The image manager's options over `rootfs` (the base image), pulling
// through `egress`'s resolver (registries named by --allow-registry, already
// checked by ParseFlags, may be private).
images::ImageManagerOptions ImageOptionsFrom(const Flags& flags, const std::string& rootfs,
                                             egress::EgressService& egress);

// The egress proxy's options: the operator's internal endpoints (checked
// by ParseFlags).
egress::EgressOptions EgressOptionsFrom(const Flags& flags);

// Previews' domain and URLs: the listener's port unless --preview-url
// names the scheme (and port) a proxy in front serves.
// The fronts' default images: kiln's, with the operator's --front-image
// replacing or adding (checked by ParseFlags).
std::vector<images::FrontImages::Definition> FrontImagesFrom(const Flags& flags);

api::PortSettings PortSettingsFrom(const Flags& flags);

api::ServerLimits ServerLimitsFrom(const Flags& flags);
api::SandboxFusionOptions SandboxFusionOptionsFrom(const Flags& flags);

}  // namespace kiln::daemon
