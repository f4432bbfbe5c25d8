#include "images/manager/build_cache.h"

#include <nlohmann/json.hpp>

#include "common/digest.h"

namespace kiln::images {

using nlohmann::json;

std::string RunStepKey(const std::string& parent, const RunInstr& run, const OciConfig& config,
                       const network::Policy& network) {
  return Sha256Hex(json{{"op", "run"},
                        {"parent", parent},
                        {"argv", run.command.argv},  // a shell form comes with its SHELL
                        {"env", config.env},
                        {"args", run.build_args},
                        {"user", config.user},
                        {"workdir", config.working_dir},
                        {"network", network.ToJson()}}
                       .dump());
}

std::string CopyStepKey(const std::string& parent, const CopyInstr& copy, const std::string& dest,
                        const std::string& sources_digest) {
  return Sha256Hex(json{{"op", copy.add ? "add" : "copy"},
                        {"parent", parent},
                        {"dest", dest},
                        {"sources", sources_digest},
                        {"chown", copy.chown.value_or("")},
                        // No --chmod is -1 converted to uint32_t (4294967295), as
                        // keys have always spelled it.
                        {"chmod", copy.chmod ? *copy.chmod : -1}}
                       .dump());
}

LayerId WorkdirLayerId(const std::string& parent, const std::string& path) {
  return *LayerId::Parse(
      Sha256Hex(json{{"op", "workdir"}, {"parent", parent}, {"path", path}}.dump()));
}

std::optional<LayerId> StepCache::Find(const std::string& key) const {
  if (!enabled_) return std::nullopt;
  auto text = host_.CachedStep(owner_, key);
  std::optional<LayerId> layer = text ? LayerId::Parse(*text) : std::nullopt;
  if (!layer || !host_.Layers().Layer(*layer)) return std::nullopt;
  return layer;
}

void StepCache::Store(const std::string& key, const LayerId& layer) {
  host_.CacheStep(owner_, key, layer);
}

}  // namespace kiln::images
