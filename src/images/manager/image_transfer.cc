// ImageManager: the image layers of a snapshot that moves between hosts
// (store/snapshot_transfer.h): what an export sends, where an import puts
// what it receives.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "common/log.h"
#include "common/unique_fd.h"
#include "images/layers/layer_export.h"
#include "images/manager/image_manager.h"

namespace kiln::images {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Layer tars received by one import, written to the store's tmp/ and
// unpacked into the store only at Commit, after every checksum of the
// snapshot matched; the destructor removes what was not stored.
class ImportedLayers : public store::LayerSink {
 public:
  // `imports` counts live sinks: the image store's collection keeps every
  // layer and root while one lives (what it stores is in no record yet).
  // `held`: the importing key's layers. A layer the tar leaves out must be
  // one of them: another tenant's layer of that digest is no proof the key
  // has its bytes, and the refusal must not tell it apart from an absent
  // one (it would say what others pulled).
  ImportedLayers(ImageStorage& storage, uint64_t limit_bytes, std::atomic<int>& imports,
                 std::set<LayerId> held)
      : storage_(storage), limit_bytes_(limit_bytes), imports_(imports), held_(std::move(held)) {
    ++imports_;
  }
  ~ImportedLayers() override {
    fd_.reset();
    for (const auto& [sha, path] : received_) ::unlink(path.c_str());
    --imports_;
  }

  bool Has(const std::string& sha256) override { return Held(sha256).has_value(); }

  Status Begin(const std::string& sha256, uint64_t size) override {
    pending_ += size;
    if (limit_bytes_ && storage_.LayerBytes() + pending_ > limit_bytes_)
      return Status(Code::kQuotaExceeded,
                    "the snapshot's image layers (" + std::to_string(pending_ >> 20) +
                        " MiB so far) would take image storage past --image-storage-mib " +
                        std::to_string(limit_bytes_ >> 20) + ": delete images (and prune) first",
                    json{{"code", "storage_quota_exceeded"}});
    std::string path = storage_.TempPath("import-layer");
    fd_.reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd_) return WriteError(sha256);
    received_[sha256] = path;
    current_ = sha256;
    return Status::Ok();
  }

  Status Data(std::string_view data) override {
    return WriteAll(fd_.get(), data) ? Status::Ok() : WriteError(current_);
  }

  Status End() override {
    if (::close(fd_.release()) < 0) return WriteError(current_);
    return Status::Ok();
  }

  Result<store::ImportedRoot> Commit(const std::vector<store::TransferLayer>& layers) override {
    struct {
      std::vector<LayerId> layers;
    } out;
    for (const auto& layer : layers) {
      if (!layer.base.empty()) {
        std::optional<LayerId> base = LayerId::Parse(layer.base);
        if (!base || !base->builtin())
          return Status(Code::kInvalidArchive, "layer base " + layer.base + " is no base image");
        out.layers.push_back(*base);
        continue;
      }
      if (auto it = received_.find(layer.sha256); it != received_.end()) {
        // Unpacked under the sha256 computed again while reading: the id
        // is this host's digest of the bytes, never the tar's word.
        UnpackOptions options;
        options.expected_diff_id = layer.sha256;
        Result<LayerInfo> added = storage_.AddLayerTar(it->second, options);
        ::unlink(it->second.c_str());
        received_.erase(it);
        if (!added.ok()) return added.status();
        out.layers.push_back(added->id);
        continue;
      }
      std::optional<LayerInfo> have = Held(layer.sha256);
      if (!have)
        return Status(Code::kSnapshotIncompatible,
                      "image layer " + layer.sha256 + " left this host during the import",
                      json{{"missingLayers", json::array({layer.sha256})}});
      out.layers.push_back(have->id);
    }
    Result<std::string> root = storage_.EnsureRoot(out.layers);
    if (!root.ok()) return root.status();
    store::ImportedRoot imported;
    imported.rootfs = *root;
    for (const auto& l : out.layers) imported.layers.push_back(l.str());
    return imported;
  }

 private:
  // The layer of the key's whose tar has this sha256.
  std::optional<LayerInfo> Held(const std::string& sha256) const {
    std::optional<Sha256Digest> d = Sha256Digest::FromHex(sha256);
    std::optional<LayerInfo> l = d ? storage_.LayerByTar(*d) : std::nullopt;
    if (!l || !held_.count(l->id)) return std::nullopt;
    return l;
  }

  static Status WriteError(const std::string& sha256) {
    int err = errno;
    if (err == ENOSPC || err == EDQUOT)
      return Status(Code::kNoSpace, "no space left on the state disk for image layer " + sha256);
    return Status(Code::kIoError, "cannot write image layer " + sha256 + ": " + std::strerror(err));
  }

  ImageStorage& storage_;
  uint64_t limit_bytes_;
  std::atomic<int>& imports_;
  std::set<LayerId> held_;
  uint64_t pending_ = 0;
  std::map<std::string, std::string> received_;  // sha256 -> its tar in tmp/
  std::string current_;
  UniqueFd fd_;
};

}  // namespace

Result<std::vector<store::TransferLayer>> ImageManager::TransferLayers(
    const store::SnapshotRecord& snapshot) {
  std::vector<LayerId> ids;
  if (!snapshot.layers.empty()) {
    Result<std::vector<LayerId>> parsed = ImageStorage::ParseLayers(snapshot.layers, "layers");
    if (!parsed.ok()) return parsed.status();
    ids = *std::move(parsed);
  } else if (snapshot.image) {
    if (std::optional<ImageRecord> rec = Load(*snapshot.image)) ids = rec->layers;
  }
  if (ids.empty())
    return Status(Code::kNotSupported, "snapshot " + snapshot.id + " runs image " +
                                           snapshot.image.value_or(snapshot.rootfs) +
                                           " whose layers this kilnd no longer has");
  std::vector<store::TransferLayer> out;
  for (const auto& id : ids) {
    store::TransferLayer layer;
    std::string dir = storage_.LayerDir(id);
    if (id.builtin()) {  // kiln's built-in base: the receiver has its own
      layer.base = id.str();
      out.push_back(std::move(layer));
      continue;
    }
    if (!storage_.Layer(id))
      return Status(Code::kNotSupported, "snapshot " + snapshot.id + " needs image layer " +
                                             id.str() + ", which is gone");
    Result<LayerInfo> info = storage_.WithExportDigest(id);
    if (!info.ok()) return info.status();
    layer.sha256 = info->export_sha256;
    layer.size = info->export_size;
    layer.write = [dir](const std::function<bool(std::string_view)>& write) {
      Status s = WriteLayerTar(dir, write);
      if (!s.ok()) LogWarn("layer export stopped", {{"layer", dir}, {"error", s.message()}});
      return s.ok();
    };
    out.push_back(std::move(layer));
  }
  return out;
}

std::unique_ptr<store::LayerSink> ImageManager::NewLayerSink(const std::string& owner) {
  return std::make_unique<ImportedLayers>(storage_, options_.storage_limit_mib << 20, imports_,
                                          LayersOf(owner));
}

json ImageManager::TransferableLayers() {
  json out = json::array();
  for (const auto& l : storage_.LayersByTar()) {
    std::set<std::string> digests = {l.tar_sha256, l.export_sha256};
    digests.erase("");
    for (const auto& d : digests) out.push_back({{"sha256", d}, {"bytes", l.bytes}});
  }
  return out;
}

}  // namespace kiln::images
