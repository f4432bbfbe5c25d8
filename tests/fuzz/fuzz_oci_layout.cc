// Fuzzes the reading of a pulled image (src/images/layers/oci_layout.h): an input
// is up to three files, index.json, a manifest and a config, separated by
// lines of "----". The manifest and config are stored under their real
// sha256, and "@MANIFEST@" / "@CONFIG@" in the files before them become
// those digests (with "@MSIZE@" / "@CSIZE@" their sizes), so inputs reach
// past the digest checks into the manifest and config readers, as a
// registry's answer would. The manifest and config also go straight to
// ParseImageManifest, as a pull that already holds every layer reads them.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/digest.h"
#include "fuzz_util.h"
#include "images/layers/oci_layout.h"

namespace {

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  namespace fs = std::filesystem;
  static auto* dir = new fuzz::TempDir();
  std::string layout = dir->path() + "/layout";
  std::error_code ec;
  fs::remove_all(layout, ec);
  fs::create_directories(layout + "/blobs/sha256");

  auto parts = fuzz::SplitParts(fuzz::AsText(data, size), "\n----\n");
  parts.resize(3);
  std::string& index = parts[0];
  std::string& manifest = parts[1];
  const std::string& config = parts[2];
  std::string config_digest = "sha256:" + Sha256Hex(config);
  fuzz::ReplaceAll(manifest, "@CONFIG@", config_digest);
  fuzz::ReplaceAll(manifest, "@CSIZE@", std::to_string(config.size()));
  std::string manifest_digest = "sha256:" + Sha256Hex(manifest);
  fuzz::ReplaceAll(index, "@MANIFEST@", manifest_digest);
  fuzz::ReplaceAll(index, "@MSIZE@", std::to_string(manifest.size()));
  Write(layout + "/index.json", index);
  Write(layout + "/blobs/sha256/" + manifest_digest.substr(7), manifest);
  Write(layout + "/blobs/sha256/" + config_digest.substr(7), config);

  auto image = images::ReadOciLayout(layout);
  if (image.ok()) {
    // kiln stores an image's settings as JSON and reads them back.
    auto again = images::ParseOciConfig(images::OciConfigToJson(image->config));
    if (!again.ok()) __builtin_trap();
  }
  nlohmann::json j = nlohmann::json::parse(config, nullptr, false);
  if (!j.is_discarded()) static_cast<void>(images::ParseOciConfig(j));
  nlohmann::json m = nlohmann::json::parse(manifest, nullptr, false);
  if (!m.is_discarded() && !j.is_discarded()) {
    auto direct = images::ParseImageManifest(m, manifest_digest, j);
    // Whatever it accepts names its layers by digests that are safe paths.
    if (direct.ok()) {
      for (const auto& layer : direct->layers) {
        if (!Sha256Digest::Parse(layer.digest.str())) __builtin_trap();
        if (!Sha256Digest::Parse(layer.diff_id.str())) __builtin_trap();
      }
    }
  }
  return 0;
}
