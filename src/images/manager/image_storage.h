// Where images live on the host, under <state dir>/image-store:
//   layers/<id>/         a layer, unpacked (see layer_unpack.h), stored once
//                        and shared by every image that has it
//   layers/<id>.json     its size and file count
//   roots/<chain id>/    an image's root filesystem: hard links into its
//                        layers (flatten.h), so a root costs directories,
//                        not file bytes; shared by images with the same layers
//   contexts/<sha256>    uploaded build contexts, by digest
//   logs/<image id>.ndjson, tmp/
// A layer's id is the sha256 of its uncompressed tar (its OCI diff id) or,
// for a layer kiln writes itself (COPY), of the step that made it; kiln's
// built-in base is "base-<hash>" (a link to its root). Every path here is
// built from a typed id (common/path_ids.h), never from a string that a
// registry, an archive or a request chose.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/path_ids.h"
#include "common/status.h"
#include "images/layers/layer_unpack.h"

namespace kiln::images {

struct LayerInfo {
  LayerId id;
  uint64_t bytes = 0, files = 0;
  // The sha256 of the tar this layer was unpacked from (its id: what
  // AddLayerTar computed), empty for a layer kiln wrote as a directory.
  std::string tar_sha256;
  // The sha256 and length of the tar WriteLayerTar (layer_export.h) makes
  // of it, once an export computed them (a layer never changes).
  std::string export_sha256;
  uint64_t export_size = 0;
};

struct PruneStats {
  int layers_removed = 0, roots_removed = 0, contexts_removed = 0;
  uint64_t bytes_freed = 0;
};

class ImageStorage {
 public:
  explicit ImageStorage(std::string dir);

  const std::string& dir() const { return dir_; }
  std::string LayerDir(const LayerId& id) const { return dir_ + "/layers/" + id.str(); }
  std::string RootDir(const Sha256Digest& chain_id) const {
    return dir_ + "/roots/" + chain_id.hex();
  }
  std::string ContextPath(const Sha256Digest& context) const {
    return dir_ + "/contexts/" + context.hex();
  }
  std::string LogPath(const Uuid& image_id) const {
    return dir_ + "/logs/" + image_id.str() + ".ndjson";
  }
  // A fresh private directory name under tmp/ (not created).
  std::string TempPath(const std::string& what);

  // A layer list (JSON strings, bottom to top: a snapshot's) as ids;
  // kInvalidImage naming `field` if one is not a layer id.
  static Result<std::vector<LayerId>> ParseLayers(const nlohmann::json& list,
                                                  const std::string& field);

  std::optional<LayerInfo> Layer(const LayerId& id) const;
  // Unpacks a layer tar into the store under its diff id (verifying the
  // digests `options` names); an existing layer is kept and the tar ignored.
  Result<LayerInfo> AddLayerTar(const std::string& tar_path, UnpackOptions options);
  // The layer with its export digest (see LayerInfo), computed and kept in
  // its metadata on first use. kInvalidImage if missing, kIoError if unreadable.
  Result<LayerInfo> WithExportDigest(const LayerId& id);
  // The layer whose tar (as unpacked, or as exported) has this sha256: a
  // match proves the content, since this host computed both digests.
  std::optional<LayerInfo> LayerByTar(const Sha256Digest& tar) const;
  // Every layer with a digest LayerByTar matches (its tar or export sha256).
  std::vector<LayerInfo> LayersByTar() const;
  // Moves a layer directory written by kiln (a COPY) into the store as `id`.
  Result<LayerInfo> AddLayerDir(const std::string& dir, const LayerId& id);

  // The chain id of a layer stack (bottom to top): the sha256 of the ids.
  static Sha256Digest ChainId(const std::vector<LayerId>& layers);
  // The root of a layer stack, flattened on first use.
  Result<std::string> EnsureRoot(const std::vector<LayerId>& layers);

  // Unique bytes of every layer but kiln's built-in base (what the quota
  // counts).
  uint64_t LayerBytes() const;
  // Bytes on disk of the whole store, each inode once (roots add only
  // directories and inodes to their layers).
  uint64_t DiskBytes() const;

  // Removes layers, roots and contexts not named in `keep_*`.
  PruneStats Prune(const std::set<std::string>& keep_layers,
                   const std::set<std::string>& keep_roots, bool contexts);

 private:
  std::string dir_;
  mutable std::mutex mu_;  // serializes adding and removing entries
  uint64_t tmp_seq_ = 0;
};

}  // namespace kiln::images
