#include "images/manager/image_storage.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/digest.h"
#include "common/log.h"
#include "images/layers/flatten.h"
#include "images/layers/layer_export.h"

namespace kiln::images {

namespace fs = std::filesystem;
using nlohmann::json;

ImageStorage::ImageStorage(std::string dir) : dir_(std::move(dir)) {
  for (const char* sub : {"layers", "roots", "contexts", "logs", "tmp"})
    fs::create_directories(dir_ + "/" + sub);
  // What a stopped daemon was writing is never complete.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_ + "/tmp", ec)) (void)RemoveTree(e.path());
  for (const auto& e : fs::directory_iterator(dir_ + "/roots", ec)) {
    if (e.path().filename().string().ends_with(".partial")) (void)RemoveTree(e.path());
  }
}

std::string ImageStorage::TempPath(const std::string& what) {
  std::lock_guard lock(mu_);
  return dir_ + "/tmp/" + what + "-" + std::to_string(getpid()) + "-" + std::to_string(++tmp_seq_);
}

Result<std::vector<LayerId>> ImageStorage::ParseLayers(const json& list, const std::string& field) {
  if (!list.is_array()) return Status(Code::kInvalidImage, field + " is not a list of layers");
  std::vector<LayerId> out;
  for (size_t i = 0; i < list.size(); ++i) {
    std::optional<LayerId> id =
        list[i].is_string() ? LayerId::Parse(list[i].get<std::string>()) : std::nullopt;
    if (!id)
      return Status(Code::kInvalidImage, field + "[" + std::to_string(i) + "] is not a layer id",
                    json{{"field", field + "[" + std::to_string(i) + "]"}});
    out.push_back(*id);
  }
  return out;
}

std::optional<LayerInfo> ImageStorage::Layer(const LayerId& id) const {
  std::ifstream f(LayerDir(id) + ".json");
  if (!f) return std::nullopt;
  json j = json::parse(f, nullptr, false);  // kilnd's own file
  if (!j.is_object() || !fs::is_directory(LayerDir(id))) return std::nullopt;
  return LayerInfo{id,
                   j.value("bytes", uint64_t{0}),
                   j.value("files", uint64_t{0}),
                   j.value("tarSha256", ""),
                   j.value("exportSha256", ""),
                   j.value("exportSize", uint64_t{0})};
}

namespace {

Status WriteMeta(const std::string& path, const LayerInfo& info) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    json meta{{"bytes", info.bytes}, {"files", info.files}};
    if (!info.tar_sha256.empty()) meta["tarSha256"] = info.tar_sha256;
    if (!info.export_sha256.empty()) {
      meta["exportSha256"] = info.export_sha256;
      meta["exportSize"] = info.export_size;
    }
    f << meta.dump();
    if (!f) return Status(Code::kNoSpace, "cannot write " + path);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status(Code::kIoError, "cannot write " + path + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

Result<LayerInfo> ImageStorage::AddLayerTar(const std::string& tar_path, UnpackOptions options) {
  std::string tmp = TempPath("layer");
  Result<LayerStats> unpacked = UnpackLayer(tar_path, tmp, options);
  if (!unpacked.ok()) return unpacked.status();
  std::optional<Sha256Digest> diff = Sha256Digest::FromHex(unpacked->diff_id);
  if (!diff) return Status(Code::kInternal, "unpacking gave no diff id");
  LayerInfo info{LayerId::Of(*diff), unpacked->bytes, unpacked->files, unpacked->diff_id};
  std::lock_guard lock(mu_);
  if (auto have = Layer(info.id)) {
    (void)RemoveTree(tmp);
    return *have;
  }
  std::error_code ec;
  fs::remove_all(LayerDir(info.id), ec);  // a half-added one (no .json)
  fs::rename(tmp, LayerDir(info.id), ec);
  if (ec) {
    (void)RemoveTree(tmp);
    return Status(Code::kIoError, "cannot store layer " + info.id.str() + ": " + ec.message());
  }
  if (Status s = WriteMeta(LayerDir(info.id) + ".json", info); !s.ok()) return s;
  return info;
}

Result<LayerInfo> ImageStorage::WithExportDigest(const LayerId& id) {
  std::optional<LayerInfo> info = Layer(id);
  if (!info) return Status(Code::kInvalidImage, "layer " + id.str() + " is missing");
  if (!info->export_sha256.empty()) return *info;
  // Once per layer (it reads every byte), outside the lock: a layer never
  // changes, so two exports computing it at once write the same values.
  Result<LayerTarDigest> digest = DigestLayerTar(LayerDir(id));
  if (!digest.ok()) return digest.status();
  info->export_sha256 = digest->sha256;
  info->export_size = digest->size;
  std::lock_guard lock(mu_);
  if (Status s = WriteMeta(LayerDir(id) + ".json", *info); !s.ok())
    LogWarn("cannot record a layer's export digest", {{"layer", id.str()}, {"error", s.message()}});
  return *info;
}

std::vector<LayerInfo> ImageStorage::LayersByTar() const {
  std::vector<LayerInfo> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_ + "/layers", ec)) {
    std::string name = e.path().filename();
    if (!name.ends_with(".json")) continue;
    std::optional<LayerId> id = LayerId::Parse(name.substr(0, name.size() - 5));
    if (!id) continue;
    auto l = Layer(*id);
    if (l && (!l->tar_sha256.empty() || !l->export_sha256.empty())) out.push_back(*l);
  }
  return out;
}

std::optional<LayerInfo> ImageStorage::LayerByTar(const Sha256Digest& tar) const {
  if (auto l = Layer(LayerId::Of(tar)); l && l->tar_sha256 == tar.hex()) return l;
  for (auto& l : LayersByTar())
    if (l.export_sha256 == tar.hex()) return l;
  return std::nullopt;
}

Result<LayerInfo> ImageStorage::AddLayerDir(const std::string& dir, const LayerId& id) {
  LayerInfo info{id, 0, 0};
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) {
      info.bytes += it->file_size(ec);
      ++info.files;
    }
  }
  std::lock_guard lock(mu_);
  if (auto have = Layer(id)) {
    (void)RemoveTree(dir);
    return *have;
  }
  fs::remove_all(LayerDir(id), ec);
  fs::rename(dir, LayerDir(id), ec);
  if (ec) {
    (void)RemoveTree(dir);
    return Status(Code::kIoError, "cannot store layer " + id.str() + ": " + ec.message());
  }
  if (Status s = WriteMeta(LayerDir(id) + ".json", info); !s.ok()) return s;
  return info;
}

Sha256Digest ImageStorage::ChainId(const std::vector<LayerId>& layers) {
  std::string all;
  for (const auto& l : layers) all += l.str() + "\n";
  return Sha256Digest::Of(all);
}

Result<std::string> ImageStorage::EnsureRoot(const std::vector<LayerId>& layers) {
  // A layer that links to a whole root (kiln's built-in base) is its own root.
  if (layers.size() == 1 && layers[0].builtin() && fs::is_symlink(LayerDir(layers[0])))
    return fs::read_symlink(LayerDir(layers[0])).string();
  std::string root = RootDir(ChainId(layers));
  std::lock_guard lock(mu_);
  if (fs::is_directory(root)) return root;
  std::vector<std::string> dirs;
  for (const auto& l : layers) {
    if (!fs::is_directory(LayerDir(l)))
      return Status(Code::kInvalidImage, "layer " + l.str() + " is missing");
    dirs.push_back(LayerDir(l));
  }
  // Flattened beside its final name and renamed, so a root that exists is whole.
  std::string partial = root + ".partial";
  (void)RemoveTree(partial);
  Result<FlattenStats> made = Flatten(dirs, partial);
  if (!made.ok()) return made.status();
  std::error_code ec;
  fs::rename(partial, root, ec);
  if (ec) {
    (void)RemoveTree(partial);
    return Status(Code::kIoError, "cannot place root " + root + ": " + ec.message());
  }
  return root;
}

uint64_t ImageStorage::LayerBytes() const {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_ + "/layers", ec)) {
    std::string name = e.path().filename();
    if (!name.ends_with(".json")) continue;
    std::optional<LayerId> id = LayerId::Parse(name.substr(0, name.size() - 5));
    // kiln's built-in base (a link to its root) is the install's, not the quota's.
    if (!id || id->builtin()) continue;
    if (auto l = Layer(*id)) total += l->bytes;
  }
  return total;
}

uint64_t ImageStorage::DiskBytes() const { return DiskUsage(dir_); }

PruneStats ImageStorage::Prune(const std::set<std::string>& keep_layers,
                               const std::set<std::string>& keep_roots, bool contexts) {
  PruneStats stats;
  // Under the lock, what goes is only renamed into tmp/; it is removed after.
  // Removing a root (tens of thousands of links) took a minute on a busy
  // disk, and a create's EnsureRoot waited on the lock all that time
  // (docs/notes/2026-12-07-e2b-conformance.md). tmp/ is emptied at start,
  // so a daemon stopped mid-removal leaves nothing behind.
  std::vector<std::string> doomed;  // roots first: they hold links into the layers
  std::unique_lock lock(mu_);
  auto take = [&](const fs::path& path) {
    std::string to =
        dir_ + "/tmp/pruned-" + std::to_string(getpid()) + "-" + std::to_string(++tmp_seq_);
    std::error_code ec;
    fs::rename(path, to, ec);
    if (ec) return false;
    doomed.push_back(std::move(to));
    return true;
  };
  std::error_code ec;
  std::vector<fs::path> names;
  for (const auto& e : fs::directory_iterator(dir_ + "/roots", ec))
    if (!keep_roots.count(e.path().filename())) names.push_back(e.path());
  for (const auto& path : names)
    if (take(path)) ++stats.roots_removed;
  names.clear();
  for (const auto& e : fs::directory_iterator(dir_ + "/layers", ec)) {
    std::string name = e.path().filename();
    if (!name.ends_with(".json") && !keep_layers.count(name)) names.push_back(e.path());
  }
  for (const auto& path : names) {
    fs::remove(path.string() + ".json", ec);
    if (take(path)) ++stats.layers_removed;
  }
  uint64_t freed = 0;
  if (contexts) {  // contexts/<key folder>/<sha256>
    for (const auto& key_dir : fs::directory_iterator(dir_ + "/contexts", ec)) {
      std::error_code ec2;
      for (const auto& e : fs::directory_iterator(key_dir.path(), ec2)) {
        struct stat st;
        bool last = ::lstat(e.path().c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink <= 1;
        if (!fs::remove(e.path(), ec2)) continue;
        ++stats.contexts_removed;
        if (last) freed += static_cast<uint64_t>(st.st_blocks) * 512;
      }
      fs::remove(key_dir.path(), ec2);
    }
  }
  lock.unlock();
  // What is counted is what goes: measuring the whole store before and after
  // walked every root twice, and took most of kilnd's CPU in a build or a
  // delete (perf, docs/notes/2026-12-02-image-store-and-build-logs.md).
  for (const auto& path : doomed) (void)RemoveTree(path, &freed);
  stats.bytes_freed = freed;
  return stats;
}

}  // namespace kiln::images
