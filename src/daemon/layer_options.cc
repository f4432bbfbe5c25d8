#include "daemon/layer_options.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/contract.h"
#include "common/strings.h"
#include "images/manager/front_image_recipes.h"
#include "images/parse/registry_mirror.h"
#include "images/parse/registry_pattern.h"
#include "network/internal_endpoints.h"

namespace kiln::daemon {
namespace {

// MemTotal less 1 GiB for the host (at least 512 MiB); 4 GiB if unreadable.
int64_t HostMemoryMib() {
  std::ifstream f("/proc/meminfo");
  std::string name;
  int64_t kib = 0;
  while (f >> name >> kib) {
    if (name == "MemTotal:") return std::max<int64_t>(512, kib / 1024 - 1024);
    f.ignore(64, '\n');
  }
  return 4096;
}

std::string ExeDir() { return std::filesystem::canonical("/proc/self/exe").parent_path(); }

}  // namespace

void FillDefaultPaths(Flags* flags) {
  if (flags->image_dir.empty()) flags->image_dir = flags->state_dir + "/images";
  if (flags->agent.empty()) flags->agent = ExeDir() + "/kiln-agent";
  if (flags->image_recipe.empty()) flags->image_recipe = ExeDir() + "/../../images/base/build.sh";
  if (flags->console_dir.empty()) {
    // build/bin/kilnd serves build/console; the sanitized tree's the same one.
    flags->console_dir = ExeDir() + "/../console";
    if (!std::filesystem::is_directory(flags->console_dir))
      flags->console_dir = ExeDir() + "/../../build/console";
  }
}

control::CapacityLimits CapacityLimitsFrom(const Flags& flags) {
  control::CapacityLimits limits;
  limits.host_memory_mib = flags.host_memory_mib > 0 ? flags.host_memory_mib : HostMemoryMib();
  limits.host_vcpus = flags.host_vcpus > 0
                          ? flags.host_vcpus
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  limits.memory_overcommit = flags.memory_overcommit;
  limits.host_disk_mib = flags.host_disk_mib;
  if (limits.host_disk_mib == 0) {
    std::error_code ec;
    std::filesystem::create_directories(flags.state_dir, ec);
    auto space = std::filesystem::space(flags.state_dir, ec);
    if (!ec)
      limits.host_disk_mib = std::max<int64_t>(1, static_cast<int64_t>(space.capacity >> 20));
  }
  limits.disk_overcommit = flags.disk_overcommit;
  limits.cpu_overcommit = flags.cpu_overcommit;
  limits.key_sandboxes = flags.key_sandboxes;
  limits.key_waiting = flags.key_waiting_creates;
  return limits;
}

int64_t PoolMemoryMib(const Flags& flags, const control::CapacityLimits& limits) {
  return flags.pool_memory_mib >= 0 ? flags.pool_memory_mib : limits.host_memory_mib / 16;
}

control::ManagerOptions ManagerOptionsFrom(const Flags& flags,
                                           const control::CapacityLimits& limits) {
  control::ManagerOptions options;
  options.default_pool_size = flags.pool_size;
  options.meter_interval_ms = flags.meter_interval_ms;
  // Warm pools by demand, within a 16th of the host's memory by default.
  int64_t pool_mib = PoolMemoryMib(flags, limits);
  options.pool.adaptive = pool_mib > 0;
  options.pool.sizer.budget_bytes = static_cast<uint64_t>(pool_mib) << 20;
  options.pool.sizer.idle_ms = int64_t{flags.pool_idle_seconds} * 1000;
  options.pool.sizer.max_size = flags.pool_max_size;
  options.pool.pins_path = flags.state_dir + "/pool-pins.json";
  options.pool.warm_copies = flags.warm_copies;
  options.max_lease_seconds = flags.max_lease_seconds;
  if (!flags.prices.empty()) {
    std::ifstream f(flags.prices);
    auto j = nlohmann::json::parse(f, nullptr, false);
    if (!f || j.is_discarded()) throw std::invalid_argument(flags.prices + " is not JSON");
    options.prices = control::PriceTable::FromJson(j);
  }
  return options;
}

images::ImageManagerOptions ImageOptionsFrom(const Flags& flags, const std::string& rootfs,
                                             egress::EgressService& egress) {
  images::ImageManagerOptions options;
  options.store_dir = flags.state_dir + "/image-store";
  options.base_rootfs = rootfs;
  options.storage_limit_mib = static_cast<uint64_t>(flags.image_storage_mib);
  options.builds_at_once = flags.image_builds;
  options.context_quota_bytes = static_cast<uint64_t>(flags.context_storage_mib) << 20;
  options.resolver = &egress.resolver();
  options.host_addresses = &egress.host_addresses();
  for (const std::string& allowed : flags.allowed_registries)  // checked by ParseFlags
    options.allowed_registries.push_back(*images::ParseRegistryPattern(allowed));
  options.mirrors = *images::ParseRegistryMirrors(flags.registry_mirrors,  // checked by ParseFlags
                                                  flags.registry_mirror_only);
  options.warm_shape =
      Shape{static_cast<int>(contract::kVcpu.def), static_cast<int>(contract::kMemoryMiB.def),
            static_cast<int>(contract::kDiskMiB.def)};
  return options;
}

egress::EgressOptions EgressOptionsFrom(const Flags& flags) {
  egress::EgressOptions options;
  std::vector<network::InternalEndpoint> internal;
  for (const std::string& text : flags.egress_internal) {
    auto endpoint = network::ParseInternalEndpoint(text);
    if (!endpoint.ok()) throw std::invalid_argument(endpoint.status().message());
    internal.push_back(*std::move(endpoint));
  }
  options.internal = network::InternalEndpoints(std::move(internal));
  return options;
}

std::vector<images::FrontImages::Definition> FrontImagesFrom(const Flags& flags) {
  std::vector<images::FrontImages::Definition> overrides;
  for (const std::string& text : flags.front_images)
    overrides.push_back(*images::ReadFrontImageFlag(text));
  return images::WithOverrides(
      images::ShippedFrontImages(flags.sandboxfusion_image, images::ReadFrontImageHost()),
      std::move(overrides));
}

api::PortSettings PortSettingsFrom(const Flags& flags) {
  api::PortSettings p;
  p.domain = AsciiLower(flags.preview_domain);
  p.relay_idle_ms = flags.relay_idle_s * 1000;
  std::string url = flags.preview_url;
  if (url.empty()) {
    p.url_port = flags.listen.substr(flags.listen.rfind(':') + 1);
  } else if (size_t colon = url.find(':'); colon != std::string::npos) {
    p.url_scheme = url.substr(0, colon);
    p.url_port = url.substr(colon + 1);
  } else {
    p.url_scheme = url;
  }
  return p;
}

api::ServerLimits ServerLimitsFrom(const Flags& flags) {
  return api::ServerLimits{flags.request_timeout_s, flags.idle_timeout_s, flags.max_connections,
                           flags.max_connections_per_address, flags.websocket_idle_s};
}

api::SandboxFusionOptions SandboxFusionOptionsFrom(const Flags& flags) {
  api::SandboxFusionOptions options;
  options.image = flags.sandboxfusion_image;
  options.pool_size = flags.sandboxfusion_pool;
  options.concurrency = flags.sandboxfusion_concurrency;
  options.key_concurrency = flags.sandboxfusion_key_concurrency;
  options.queue = flags.sandboxfusion_queue;
  return options;
}

}  // namespace kiln::daemon
