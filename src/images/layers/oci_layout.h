// Reading an image from an OCI image layout: what
// `skopeo copy docker://… oci:DIR:latest` leaves on disk (index.json and
// blobs/sha256/<hex>). kiln pulls with skopeo into such a directory, then
// takes the image's run settings and layer list from here; the layers are
// unpacked by layer_unpack.h, which checks their digests while reading.
//
// Everything here comes from a registry, so it is untrusted: every digest
// is checked for shape before it becomes a path, every manifest and config
// blob is hashed against its digest, and types are checked field by field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/path_ids.h"
#include "common/status.h"

namespace kiln::images {

struct OciLayer {
  Sha256Digest digest;  // of the blob as stored (compressed)
  std::string media_type;
  uint64_t size = 0;
  std::string blob_path;  // in a layout; "" from ParseImageManifest
  Sha256Digest diff_id;   // the config's rootfs.diff_ids: of the uncompressed tar
};

// The run settings of an image (the config's "config" object).
struct OciConfig {
  std::vector<std::string> env;  // "K=V"
  std::string user, working_dir;
  std::vector<std::string> cmd, entrypoint;
  std::vector<std::string> exposed_ports;  // "8000/tcp", sorted
  std::map<std::string, std::string> labels;
  std::optional<std::string> stop_signal;
  bool operator==(const OciConfig&) const = default;
};

struct OciImage {
  std::string manifest_digest;  // "sha256:<hex>" of the image manifest (not of an index)
  std::string config_digest;    // "sha256:<hex>"
  OciConfig config;
  std::vector<OciLayer> layers;  // bottom to top
};

// Reads index.json -> manifest (if the index entry is an image index /
// manifest list, picks linux/amd64) -> config, from `layout_dir`. When
// index.json lists several manifests, the one whose
// org.opencontainers.image.ref.name is "latest" is taken. Verifies the
// sha256 (and size) of the manifest and config blobs (kInvalidImage naming
// the blob on mismatch), checks media types (OCI and Docker v2 schema 2 both
// accepted; schema 1 refused with a clear message), layer count == diff_ids
// count, and that every layer blob exists (its content is checked when it is
// unpacked). Blob paths are layout_dir/blobs/sha256/<hex>. kNotFound if
// layout_dir has no index.json; kImageNotFound if an image index has no
// linux/amd64 entry; kInvalidImage for anything malformed, with
// {"blob": digest} or {"field": ...} details.
Result<OciImage> ReadOciLayout(const std::string& layout_dir);

// The part of ReadOciLayout after the blobs are read: an image manifest
// (OCI or Docker schema 2, not an index) and its config, both untrusted --
// the manifest's own fields, the config's run settings, rootfs.diff_ids
// (sha256 digests, as many as the manifest's layers) and each layer's media
// type and digest. kInvalidImage naming the field. Also what the
// stored-layers shortcut of a pull reads (a registry's manifest and config,
// fetched without the layers). Layers come without a blob_path.
Result<OciImage> ParseImageManifest(const nlohmann::json& manifest,
                                    const std::string& manifest_digest,
                                    const nlohmann::json& config);

// Parses an OCI/Docker config JSON (the part above) — also used for configs
// kiln writes itself. Takes a whole image config (the run settings are its
// "config" object; a null or missing one means none) or that object alone.
// A field of the wrong type is kInvalidImage naming it ("config.Env[2]").
Result<OciConfig> ParseOciConfig(const nlohmann::json& config);

// The reverse, for kiln's own images' records: the OCI config's "config"
// object (Env, User, WorkingDir, Cmd, Entrypoint, ExposedPorts{}, Labels,
// StopSignal), empty fields left out. ParseOciConfig gives `config` back.
nlohmann::json OciConfigToJson(const OciConfig& config);

}  // namespace kiln::images
