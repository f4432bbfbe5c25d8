#include "store/snapshot_transfer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/contract.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/path_ids.h"

namespace kiln::store {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kManifestMax = 4 << 20;
constexpr size_t kFilesMax = 100000;
constexpr size_t kBlock = 1 << 20;

// The record as it travels: what makes the snapshot what it is, not where
// or whose it is here (owner, expiry, root and layers, hidden kinds).
json PortableRecord(const SnapshotRecord& r) {
  json j = r;
  for (const char* local : {"owner", "expiresMs", "rootfs", "layers", "imageWarm", "pausedSandbox",
                            "temporary", "sourceImage", "runAs"})
    j.erase(local);
  // The image it ran, as the receiver keeps it: provenance (sourceImage).
  if (r.source_image && !r.image) j["image"] = *r.source_image;
  return j;
}

constexpr size_t kLayersMax = 256;

std::string LayerEntry(const std::string& sha256) { return "layers/" + sha256 + ".tar"; }

Status InvalidArchive(const std::string& message) {
  return Status(Code::kInvalidArchive, "kiln-snapshot.json: " + message);
}

// "checkpoint/a/b": relative, no "." or ".." or empty parts.
bool CleanCheckpointPath(const std::string& p) {
  if (!p.starts_with("checkpoint/") || p.size() > 99 || p.back() == '/') return false;
  size_t start = 0;
  while (start < p.size()) {
    size_t slash = p.find('/', start);
    if (slash == std::string::npos) slash = p.size();
    std::string part = p.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = slash + 1;
  }
  return true;
}

// An integer member in [min, max]; a Status naming it otherwise.
template <typename T>
Status ReadInt(const json& rec, const char* key, int64_t min, int64_t max, T* out) {
  auto it = rec.find(key);
  if (it == rec.end() || !it->is_number_integer() || it->get<int64_t>() < min ||
      it->get<int64_t>() > max)
    return InvalidArchive(std::string("record.") + key + " must be an integer from " +
                          std::to_string(min) + " to " + std::to_string(max));
  *out = static_cast<T>(it->get<int64_t>());
  return Status::Ok();
}

Status ParseRecord(const json& rec, SnapshotRecord* r) {
  if (!rec.is_object()) return InvalidArchive("record must be an object");
  auto id = rec.find("id");
  if (id == rec.end() || !id->is_string() || !Uuid::Parse(id->get<std::string>()))
    return InvalidArchive("record.id must be a snapshot id (a lowercase UUID)");
  r->id = id->get<std::string>();
  auto name = rec.find("name");
  if (name != rec.end() && !name->is_null()) {
    if (!name->is_string() || name->get<std::string>().size() > contract::kSnapshotNameMax)
      return InvalidArchive("record.name must be a string of at most " +
                            std::to_string(contract::kSnapshotNameMax) + " bytes, or null");
    r->name = name->get<std::string>();
  }
  auto labels = rec.find("labels");
  if (labels != rec.end() && !labels->is_null()) {
    if (!labels->is_object()) return InvalidArchive("record.labels must be an object of strings");
    for (const auto& [k, v] : labels->items()) {
      if (!v.is_string()) return InvalidArchive("record.labels." + k + " must be a string");
      r->labels[k] = v.get<std::string>();
    }
  }
  if (auto src = rec.find("sourceSandboxId"); src != rec.end() && src->is_string())
    r->source_sandbox_id = src->get<std::string>();
  if (auto image = rec.find("image"); image != rec.end() && !image->is_null()) {
    if (!image->is_string() || image->get<std::string>().empty() ||
        image->get<std::string>().size() > 128 ||
        image->get<std::string>().find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:") !=
            std::string::npos)
      return InvalidArchive(
          "record.image must be an image id (letters, digits, \"-_.:\", 1 to 128)");
    r->source_image = image->get<std::string>();  // where it came from; the root is rebuilt here
  }
  // The API's own bounds: a shape a create could not ask for is not one an
  // archive can bring in.
  Status s = ReadInt(rec, "vcpu", contract::kVcpu.min, contract::kVcpu.max, &r->shape.vcpu);
  if (s.ok())
    s = ReadInt(rec, "memoryMiB", contract::kMemoryMiB.min, contract::kMemoryMiB.max,
                &r->shape.memory_mib);
  if (s.ok())
    s = ReadInt(rec, "diskMiB", contract::kDiskMiB.min, contract::kDiskMiB.max, &r->shape.disk_mib);
  if (s.ok())
    s = ReadInt(rec, "retentionDays", contract::kRetentionDays.min, contract::kRetentionDays.max,
                &r->retention_days);
  if (s.ok()) s = ReadInt(rec, "createdMs", 0, INT64_MAX, &r->created_ms);
  if (s.ok()) s = ReadInt(rec, "captureMs", 0, INT64_MAX, &r->capture_ms);
  if (!s.ok()) return s;
  r->network = rec.value("network", json());
  auto sudo_off = rec.find("sudoOff");
  if (sudo_off != rec.end() && !sudo_off->is_boolean())
    return InvalidArchive("record.sudoOff must be true or false");
  r->sudo_off = sudo_off != rec.end() && sudo_off->get<bool>();
  auto mode = rec.find("mode");
  std::optional<SnapshotMode> parsed = mode == rec.end() ? SnapshotMode::kMemory
                                       : mode->is_string()
                                           ? ParseSnapshotMode(mode->get<std::string>())
                                           : std::nullopt;
  if (!parsed) return InvalidArchive("record.mode must be \"memory\" or \"disk\"");
  r->mode = *parsed;
  return Status::Ok();
}

// Same files, sizes and checksums.
bool SameFiles(const json& a, const json& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [rel, want] : a.items()) {
    auto it = b.find(rel);
    if (it == b.end() || it->value("size", uint64_t{0}) != want.value("size", uint64_t{0}) ||
        it->value("xxh3_128", "") != want.value("xxh3_128", ""))
      return false;
  }
  return true;
}

Status WriteError(const std::string& what) {
  int err = errno;
  if (err == ENOSPC || err == EDQUOT)
    return Status(Code::kNoSpace, "no space left on the state disk to import " + what);
  return Status(Code::kIoError, "cannot write " + what + ": " + std::strerror(err));
}

}  // namespace

Result<SnapshotExport> SnapshotExport::Prepare(const SnapshotStore& store,
                                               const SnapshotRecord& record,
                                               const TransferHost& host,
                                               std::vector<TransferLayer> layers,
                                               const std::set<std::string>& skip) {
  if ((record.image || !record.rootfs.empty()) && layers.empty())
    return Status(Code::kNotSupported,
                  "snapshot " + record.id + " runs image " + record.image.value_or(record.rootfs) +
                      " whose layers this kilnd cannot name: it cannot be exported");
  auto files = store.VerifiedFiles(record.id);
  if (!files.ok()) return files.status();
  SnapshotExport out;
  out.dir_ = store.SnapshotDir(record.id);
  json manifest = {{"format", kSnapshotFormat},
                   {"record", PortableRecord(record)},
                   {"engine", host.engine_version},
                   {"base", host.base_image},
                   {"files", *files}};
  uint64_t data = 0;
  if (!layers.empty()) {
    json listed = json::array();
    for (auto& layer : layers) {
      if (!layer.base.empty()) {
        listed.push_back({{"base", layer.base}});
        continue;
      }
      bool included = !skip.count(layer.sha256);
      listed.push_back({{"sha256", layer.sha256}, {"size", layer.size}, {"included", included}});
      if (!included) continue;
      data += kTarBlock + layer.size + TarPadding(layer.size).size();
      out.sent_.push_back(std::move(layer));
    }
    manifest["layers"] = std::move(listed);
  }
  out.manifest_ = manifest.dump(2);
  out.created_s_ = record.created_ms / 1000;
  out.size_ = kTarBlock + out.manifest_.size() + TarPadding(out.manifest_.size()).size() + data;
  for (const auto& [rel, want] : files->items()) {
    uint64_t size = want.at("size").get<uint64_t>();
    out.files_[rel] = size;
    out.size_ += kTarBlock + size + TarPadding(size).size();
  }
  out.size_ += TarEnd().size();
  return out;
}

bool SnapshotExport::Stream(const std::function<bool(std::string_view)>& write) const {
  if (!write(TarFileHeader(kSnapshotManifestEntry, manifest_.size(), created_s_) + manifest_ +
             TarPadding(manifest_.size())))
    return false;
  for (const auto& layer : sent_) {
    if (!write(TarFileHeader(LayerEntry(layer.sha256), layer.size, created_s_))) return false;
    uint64_t sent = 0;
    bool ok = layer.write([&](std::string_view data) {
      sent += data.size();
      return sent <= layer.size && write(data);
    });
    if (!ok || sent != layer.size) {
      LogWarn("snapshot export stopped: a layer changed or could not be read",
              {{"layer", layer.sha256}, {"bytes", sent}, {"expected", layer.size}});
      return false;
    }
    if (std::string pad = TarPadding(layer.size); !pad.empty() && !write(pad)) return false;
  }
  std::string buf(kBlock, '\0');
  for (const auto& [rel, size] : files_) {
    UniqueFd fd(::open((dir_ + "/" + rel).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) < 0 || static_cast<uint64_t>(st.st_size) != size) {
      LogWarn("snapshot export stopped: a file changed", {{"file", rel}});
      return false;
    }
    if (!write(TarFileHeader(rel, size, st.st_mtim.tv_sec))) return false;
    for (uint64_t left = size; left > 0;) {
      ssize_t n = ::read(fd.get(), buf.data(), std::min<uint64_t>(left, buf.size()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      left -= static_cast<uint64_t>(n);
      if (!write(std::string_view(buf.data(), static_cast<size_t>(n)))) return false;
    }
    if (std::string pad = TarPadding(size); !pad.empty() && !write(pad)) return false;
  }
  return write(TarEnd());
}

SnapshotImport::SnapshotImport(SnapshotStore& store, ImportRequest request)
    : store_(store), request_(std::move(request)) {}

SnapshotImport::~SnapshotImport() { Cleanup(); }

void SnapshotImport::Cleanup() {
  fd_.reset();
  if (dir_made_ && !adopted_) {
    std::error_code ec;
    fs::remove_all(store_.ImportDir(record_.id), ec);
    dir_made_ = false;
  }
}

Status SnapshotImport::ReadManifest() {
  json m = json::parse(manifest_text_, nullptr, false);
  if (m.is_discarded() || !m.is_object()) return InvalidArchive("is not a JSON object");
  if (m.value("format", json()) != kSnapshotFormat)
    return InvalidArchive("format must be \"" + std::string(kSnapshotFormat) + "\" (it is " +
                          m.value("format", json()).dump() + ")");
  if (Status s = ParseRecord(m.value("record", json()), &record_); !s.ok()) return s;
  const std::string& id = record_.id;
  json engine = m.value("engine", json());
  if (!engine.is_string()) return InvalidArchive("engine must name the runsc version");
  if (engine != request_.host.engine_version)
    return Status(
        Code::kSnapshotIncompatible,
        "snapshot " + id + " was captured by runsc " + engine.get<std::string>() +
            " but this host runs runsc " + request_.host.engine_version +
            ": a checkpoint restores only on the runsc version that wrote it",
        json{{"snapshotId", id}, {"engine", engine}, {"hostEngine", request_.host.engine_version}});
  json base = m.value("base", json());
  if (!base.is_string()) return InvalidArchive("base must name the base image");
  if (base != request_.host.base_image)
    return Status(Code::kSnapshotIncompatible,
                  "snapshot " + id + " ran on base image " + base.get<std::string>() +
                      " but this kilnd's is " + request_.host.base_image +
                      ": hosts that exchange snapshots must share one base image (one recipe)",
                  json{{"snapshotId", id}, {"base", base}, {"hostBase", request_.host.base_image}});
  files_ = m.value("files", json());
  if (!files_.is_object() || files_.empty() || files_.size() > kFilesMax)
    return InvalidArchive("files must list the checkpoint's files (1 to " +
                          std::to_string(kFilesMax) + ")");
  uint64_t total = 0;
  for (const auto& [rel, want] : files_.items()) {
    if (!CleanCheckpointPath(rel))
      return InvalidArchive("files: \"" + rel +
                            "\" is not a path under checkpoint/ (no \"..\", \".\" or empty parts, "
                            "under 100 bytes)");
    if (!want.is_object() || !want.contains("size") || !want["size"].is_number_unsigned() ||
        !want.contains("xxh3_128") || !want["xxh3_128"].is_string() ||
        !IsLowerHex(want["xxh3_128"].get<std::string>(), 32))
      return InvalidArchive("files." + rel + " must be {size, xxh3_128 (32 lowercase hex)}");
    total += want["size"].get<uint64_t>();
  }
  // A disk snapshot is its upper tar and nothing else (a copy boots from it).
  if (record_.mode == SnapshotMode::kDisk &&
      (files_.size() != 1 || !files_.contains(std::string("checkpoint/") + kDiskUpperTar)))
    return InvalidArchive(std::string("files: a disk snapshot holds only checkpoint/") +
                          kDiskUpperTar);
  record_.size_bytes = total;  // what is stored and billed, whatever the record said
  if (request_.check_record) {
    if (Status s = request_.check_record(record_); !s.ok()) return s;
  }
  if (Status s = ReadLayers(m.value("layers", json())); !s.ok()) return s;
  return CheckExisting();
}

Status SnapshotImport::ReadLayers(const json& layers) {
  const std::string& id = record_.id;
  if (layers.is_null() || (layers.is_array() && layers.empty())) {
    if (record_.source_image)
      return InvalidArchive("record.image names an image but layers lists none");
    return Status::Ok();
  }
  if (!layers.is_array() || layers.size() > kLayersMax)
    return InvalidArchive("layers must list the image's layers (at most " +
                          std::to_string(kLayersMax) + ")");
  if (!request_.layers)
    return Status(Code::kSnapshotIncompatible,
                  "snapshot " + id + " runs an image, and this kilnd keeps no image store",
                  json{{"snapshotId", id}});
  json missing = json::array();
  for (size_t i = 0; i < layers.size(); ++i) {
    const json& l = layers[i];
    std::string at = "layers[" + std::to_string(i) + "]";
    TransferLayer layer;
    if (l.is_object() && l.contains("base")) {
      if (l["base"] != request_.host.base_image)
        return Status(Code::kSnapshotIncompatible,
                      "snapshot " + id + "'s image is built on base image " + l["base"].dump() +
                          " but this kilnd's is " + request_.host.base_image,
                      json{{"snapshotId", id}, {"base", l["base"]}});
      layer.base = request_.host.base_image;
      layers_.push_back(std::move(layer));
      continue;
    }
    if (!l.is_object() || !l.contains("sha256") || !l["sha256"].is_string() ||
        !IsLowerHex(l["sha256"].get<std::string>(), 64) || !l.contains("size") ||
        !l["size"].is_number_unsigned() || !l.contains("included") || !l["included"].is_boolean())
      return InvalidArchive(
          at + " must be {\"base\": name} or {sha256 (64 lowercase hex), size, included}");
    layer.sha256 = l["sha256"].get<std::string>();
    layer.size = l["size"].get<uint64_t>();
    if (l["included"].get<bool>()) {
      if (!layer_entries_.emplace(LayerEntry(layer.sha256), layer.size).second)
        return InvalidArchive(at + " lists layer " + layer.sha256 + " twice");
    } else if (!request_.layers->Has(layer.sha256)) {
      missing.push_back(layer.sha256);
    }
    layers_.push_back(std::move(layer));
  }
  if (!missing.empty())
    return Status(Code::kSnapshotIncompatible,
                  "snapshot " + id +
                      " needs image layers this host lacks and the tar leaves out (" +
                      missing[0].get<std::string>() +
                      (missing.size() > 1 ? " and " + std::to_string(missing.size() - 1) + " more"
                                          : std::string()) +
                      "): export it again without them in skipLayers",
                  json{{"snapshotId", id}, {"missingLayers", missing}});
  return Status::Ok();
}

Status SnapshotImport::CheckExisting() {
  if (auto have = store_.Get(record_.id)) {
    const std::string id = record_.id;
    if (have->hidden() || have->owner != request_.owner) {
      // Another key's (or kilnd's own) snapshot holds the id: this import
      // gets an id of its own, so that no key can squat the id of a
      // snapshot it merely has the tar of. The same import again finds it.
      for (const auto& mine : store_.List()) {
        if (mine.owner != request_.owner || mine.hidden() || mine.source_id != id) continue;
        auto files = store_.VerifiedFiles(mine.id);
        if (files.ok() && SameFiles(*files, files_)) {
          existing_ = mine;
          return Status::Ok();
        }
      }
      record_.source_id = id;
      record_.id = NewUuid();
    } else {
      auto files = store_.VerifiedFiles(id);
      if (!files.ok() || !SameFiles(*files, files_))
        return Status(Code::kSnapshotExists,
                      "snapshot " + id +
                          " exists on this host already with other files: an "
                          "import keeps the snapshot's id",
                      json{{"snapshotId", id}});
      existing_ = *have;  // the same snapshot: read the tar through, write nothing
      return Status::Ok();
    }
  }
  const std::string& id = record_.id;
  if (::mkdir(store_.ImportDir(id).c_str(), 0700) < 0) {
    if (errno == EEXIST)
      return Status(Code::kSnapshotExists, "snapshot " + id + " is being imported already",
                    json{{"snapshotId", id}});
    return WriteError("snapshot " + id);
  }
  dir_made_ = true;
  return Status::Ok();
}

Status SnapshotImport::BeginEntry(const std::string& name, uint64_t size) {
  entry_ = name;
  if (entries_++ == 0) {
    if (name != kSnapshotManifestEntry)
      return Status(Code::kInvalidArchive,
                    "the tar's first entry must be kiln-snapshot.json, not " + name +
                        ": this is not a kiln snapshot");
    if (size > kManifestMax) return InvalidArchive("is larger than 4 MiB");
    return Status::Ok();
  }
  if (auto layer = layer_entries_.find(name); layer != layer_entries_.end()) {
    if (seen_.count(name))
      return Status(Code::kInvalidArchive, "tar entry " + name + " appears twice");
    if (size != layer->second)
      return Status(Code::kInvalidArchive, "tar entry " + name + " is " + std::to_string(size) +
                                               " bytes but kiln-snapshot.json lists " +
                                               std::to_string(layer->second));
    in_layer_ = true;
    layer_hash_ = std::make_unique<Sha256>();
    if (existing_) return Status::Ok();
    return request_.layers->Begin(name.substr(7, 64), size);
  }
  in_layer_ = false;
  auto it = files_.find(name);
  if (it == files_.end())
    return Status(Code::kInvalidArchive,
                  "tar entry " + name + " is not listed in kiln-snapshot.json: refused");
  if (seen_.count(name))
    return Status(Code::kInvalidArchive, "tar entry " + name + " appears twice");
  uint64_t want = (*it)["size"].get<uint64_t>();
  if (size != want)
    return Status(Code::kInvalidArchive, "tar entry " + name + " is " + std::to_string(size) +
                                             " bytes but kiln-snapshot.json lists " +
                                             std::to_string(want));
  hash_ = std::make_unique<Xxh3>();
  if (existing_) return Status::Ok();
  std::string path = store_.ImportDir(record_.id) + "/" + name;
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec)
    return Status(Code::kInvalidArchive,
                  "tar entry " + name + " cannot be placed: " + ec.message());
  fd_.reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0640));
  if (!fd_) return WriteError(name);
  return Status::Ok();
}

Status SnapshotImport::EntryData(std::string_view data) {
  if (entries_ == 1) {
    manifest_text_.append(data);
    return Status::Ok();
  }
  if (in_layer_) {
    layer_hash_->Update(data);
    return existing_ ? Status::Ok() : request_.layers->Data(data);
  }
  hash_->Update(data);
  if (fd_ && !WriteAll(fd_.get(), data)) return WriteError(entry_);
  return Status::Ok();
}

Status SnapshotImport::EndEntry() {
  if (entries_ == 1) return ReadManifest();
  if (in_layer_) {
    if (layer_hash_->HexDigest() != entry_.substr(7, 64))
      return Status(
          Code::kInvalidArchive,
          "tar entry " + entry_ + " does not match the sha256 its name gives: the tar is corrupted",
          json{{"entry", entry_}});
    seen_[entry_] = true;
    return existing_ ? Status::Ok() : request_.layers->End();
  }
  std::string want = files_[entry_]["xxh3_128"].get<std::string>();
  if (hash_->HexDigest() != want)
    return Status(Code::kInvalidArchive,
                  "tar entry " + entry_ +
                      " does not match its xxh3_128 checksum in kiln-snapshot.json: the tar is "
                      "corrupted",
                  json{{"entry", entry_}});
  if (fd_ && ::close(fd_.release()) < 0) return WriteError(entry_);
  seen_[entry_] = true;
  return Status::Ok();
}

Result<ImportResult> SnapshotImport::Run(const TarSource& body) {
  Status read;
  try {
    read = ReadTar(body, *this);
  } catch (...) {
    Cleanup();
    throw;
  }
  if (!read.ok()) {
    Cleanup();
    return read;
  }
  return Finish();
}

Result<ImportResult> SnapshotImport::Finish() {
  if (entries_ == 0) return Status(Code::kInvalidArchive, "the tar holds no kiln-snapshot.json");
  for (const auto& [rel, want] : files_.items()) {
    if (!seen_.count(rel)) {
      Cleanup();
      return Status(Code::kInvalidArchive,
                    "the tar lacks " + rel + ", which kiln-snapshot.json lists",
                    json{{"entry", rel}});
    }
  }
  for (const auto& [entry, size] : layer_entries_) {
    if (!seen_.count(entry)) {
      Cleanup();
      return Status(Code::kInvalidArchive,
                    "the tar lacks " + entry + ", which kiln-snapshot.json lists as included",
                    json{{"entry", entry}});
    }
  }
  if (existing_) return ImportResult{*existing_, false};
  if (!layers_.empty()) {
    Result<ImportedRoot> root = request_.layers->Commit(layers_);
    if (!root.ok()) {
      Cleanup();
      return root.status();
    }
    record_.rootfs = root->rootfs;
    record_.layers = root->layers;
  }
  record_.owner = request_.owner;
  record_.expires_ms = request_.now_ms + static_cast<int64_t>(record_.retention_days) * 86400000;
  if (Status s = store_.AdoptImport(record_, files_); !s.ok()) {
    Cleanup();
    return s;
  }
  adopted_ = true;
  return ImportResult{record_, true};
}

}  // namespace kiln::store
