// ImageManager: reading, naming and deleting images; contexts; registries.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/digest.h"
#include "common/log.h"
#include "common/time.h"
#include "images/context/build_context.h"
#include "images/layers/flatten.h"
#include "images/manager/image_manager.h"
#include "images/parse/image_ref.h"

namespace kiln::images {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

Status NotFound(const std::string& what) {
  return Status(Code::kImageNotFound, "image " + what + " not found");
}

}  // namespace

Result<ImageRecord> ImageManager::Get(const std::string& id,
                                      const std::optional<std::string>& owner) {
  std::optional<ImageRecord> record = Load(id);
  if (!record || !Visible(*record, owner)) return NotFound(id);
  return *std::move(record);
}

Result<ImageRecord> ImageManager::Resolve(const std::string& ref,
                                          const std::optional<std::string>& owner) {
  if (ref == "base" || ref == "runtime") return Get(builtin_id_, owner);
  Result<KilnImageRef> parsed = ParseKilnImageRef(ref);
  if (!parsed.ok()) return Status(Code::kInvalidRequest, parsed.status().message());
  if (parsed->is_id) return Get(parsed->name, owner);
  // Another key's images are not found, whatever their name.
  std::string scope = owner.value_or("");
  std::optional<json> found;
  auto lookup = [&](const std::string& o) {
    if (parsed->version) return catalog_.ByVersion(o, parsed->name, *parsed->version);
    return catalog_.ByTag(o, parsed->name, parsed->tag.value_or("latest"));
  };
  if (owner) {
    found = lookup(*owner);
  } else {  // the admin: any key's, newest first
    for (const ImageRecord& rec : LoadAll(std::nullopt, parsed->name, std::nullopt)) {
      found = lookup(rec.owner);
      if (found) break;
    }
  }
  if (!found) return NotFound(ref);
  ImageRecord record = found->get<ImageRecord>();
  // A deleted version keeps its record (GET by id answers it) but no name.
  if (record.state == ImageState::kDeleted || record.state == ImageState::kDeleting)
    return NotFound(ref);
  return record;
}

std::vector<ImageRecord> ImageManager::List(const std::optional<std::string>& owner,
                                            const std::optional<std::string>& name,
                                            const std::optional<ImageState>& state) {
  std::vector<ImageRecord> out;
  for (ImageRecord& rec : LoadAll(std::nullopt, name, state)) {
    if (!state && rec.state == ImageState::kDeleted) continue;  // listed only when asked for
    if (Visible(rec, owner)) out.push_back(std::move(rec));
  }
  return out;
}

Result<ImageRecord> ImageManager::Tag(const std::string& id, const std::string& tag,
                                      const std::optional<std::string>& owner) {
  Result<ImageRecord> rec = Owned(id, owner);
  if (!rec.ok()) return rec;
  if (Status s = ValidateTag(tag); !s.ok())
    return Status(Code::kInvalidRequest, "body.tag: " + s.message());
  if (rec->state != ImageState::kReady)
    return Status(Code::kBuildInProgress, "image " + id + " is " +
                                              std::string(ImageStateName(rec->state)) +
                                              ": only a ready image can be tagged");
  catalog_.Tag(rec->owner, rec->name, tag, id);
  return *Load(id);
}

Result<ImageRecord> ImageManager::Untag(const std::string& id, const std::string& tag,
                                        const std::optional<std::string>& owner) {
  Result<ImageRecord> rec = Owned(id, owner);
  if (!rec.ok()) return rec;
  auto tagged = catalog_.ByTag(rec->owner, rec->name, tag);
  if (!tagged || tagged->get<ImageRecord>().id != id)
    return Status(Code::kNotFound, "image " + id + " has no tag " + tag, json{{"tag", tag}});
  catalog_.Untag(rec->owner, rec->name, tag);
  return *Load(id);
}

Result<ImageRecord> ImageManager::Delete(const std::string& id,
                                         const std::optional<std::string>& owner) {
  Result<ImageRecord> found = Owned(id, owner);
  if (!found.ok()) return found;
  ImageRecord& record = *found;
  if (record.state == ImageState::kDeleted) return record;
  {
    std::lock_guard lock(mu_);
    if (auto it = jobs_.find(id); it != jobs_.end()) {
      // The build stops at its next step (a running RUN is cancelled) and
      // records the image as deleted.
      it->second->cancelled = true;
      record.state = ImageState::kDeleting;
      Save(record);
      return record;
    }
  }
  record.state = ImageState::kDeleting;
  Save(record);
  for (const auto& tag : record.tags) catalog_.Untag(record.owner, record.name, tag);
  if (record.warm_snapshot) sandboxes_.snapshots().Delete(*record.warm_snapshot);
  record.state = ImageState::kDeleted;
  record.ended_ms = NowMs();
  record.tags.clear();
  Save(record);
  // Layers stay while sandboxes or snapshots of the image run or exist.
  CollectGarbage(false, false);
  LogInfo("image deleted", {{"event", "image.deleted"}, {"imageId", id}});
  return *Load(id);
}

Result<LogPage> ImageManager::Logs(
    const std::string& id, const std::optional<std::string>& owner, int64_t after, size_t limit,
    std::optional<std::chrono::steady_clock::time_point> follow_until) {
  Result<ImageRecord> rec = Get(id, owner);
  if (!rec.ok()) return rec.status();
  auto log = LogOf(id);
  if (rec->state != ImageState::kQueued && rec->state != ImageState::kBuilding) log->Close();
  return log->Read(after, limit, follow_until);
}

Result<control::PoolStatus> ImageManager::Pool(const std::string& id,
                                               const std::optional<std::string>& owner,
                                               std::optional<int> size, bool to_auto) {
  // Reading is for anyone who sees the image; sizing the built-in image's
  // pool (room on the host every key shares) is the admin's.
  bool sizing = size || to_auto;
  Result<ImageRecord> rec = sizing ? Owned(id, owner) : Get(id, owner);
  if (!rec.ok()) return rec.status();
  if (!rec->warm_snapshot) {
    if (rec->state == ImageState::kReady && rec->source == ImageSource::kBuiltin) {
      WarmBuiltinLater();
      return Status(Code::kBuildInProgress, "the built-in image is warming; retry in a few seconds")
          .WithRetryAfter(2);
    }
    return Status(Code::kBuildInProgress, "image " + id + " has no warm copy (it is " +
                                              std::string(ImageStateName(rec->state)) + ")");
  }
  const std::string& snap = *rec->warm_snapshot;
  if (sizing) sandboxes_.snapshots().ResizePool(snap, size);
  return sandboxes_.snapshots().PoolOf(snap);
}

std::string ImageManager::UploadPath() { return storage_.TempPath("upload"); }

std::string ImageManager::ContextPathOf(const std::string& owner,
                                        const Sha256Digest& digest) const {
  // One folder per key, named by a digest of the key's id (a path from
  // nothing the key chose).
  return storage_.ContextPath(Sha256Digest::Of(owner)) + "/" + digest.hex();
}

std::vector<Sha256Digest> ImageManager::MissingContexts(const std::string& owner,
                                                        const std::vector<Sha256Digest>& digests) {
  std::vector<Sha256Digest> missing;
  for (const auto& d : digests) {
    std::error_code ec;
    std::string path = ContextPathOf(owner, d);
    if (fs::exists(path, ec)) {
      // Asked for again: in use, so it is kept another kContextTtlMs.
      fs::last_write_time(path, fs::file_time_type::clock::now(), ec);
    } else {
      missing.push_back(d);
    }
  }
  return missing;
}

Result<ContextUpload> ImageManager::PutContext(const std::string& owner, const Sha256Digest& digest,
                                               const std::string& path, bool chunk) {
  const std::string& hex = digest.hex();
  std::error_code ec;
  std::string actual = FileSha256Hex(path);
  uint64_t size = fs::file_size(path, ec);
  if (actual != hex) {
    fs::remove(path, ec);
    return Status(Code::kInvalidRequest,
                  "the body's sha256 is " + actual + ", not the " + hex + " its path names",
                  json{{"expected", "sha256:" + hex}, {"actual", "sha256:" + actual}});
  }
  ExpireContexts();
  std::string dir = storage_.ContextPath(Sha256Digest::Of(owner));
  uint64_t used = 0;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename() != hex) used += e.file_size(ec);
  if (used + size > options_.context_quota_bytes) {
    fs::remove(path, ec);
    return Status(Code::kQuotaExceeded,
                  "this key's build contexts would hold " + std::to_string((used + size) >> 20) +
                      " MiB, over --context-storage-mib " +
                      std::to_string(options_.context_quota_bytes >> 20) +
                      ": contexts unused for a day are removed",
                  json{{"code", "context_quota_exceeded"}, {"usedBytes", used}});
  }
  // Unpacked once now, so a context past the limits (413) or with an entry
  // that escapes (400) is refused at upload, not later by a failed build.
  // (A build unpacks it under the same limits again.)
  if (!chunk) {
    std::string probe = storage_.TempPath("context-check");
    Result<ContextStats> checked = UnpackContext(path, probe, ContextLimits{}, nullptr);
    (void)RemoveTree(probe);
    if (!checked.ok()) {
      fs::remove(path, ec);
      return checked.status();
    }
  }
  fs::create_directories(dir, ec);
  fs::rename(path, ContextPathOf(owner, digest), ec);
  if (ec) return Status(Code::kIoError, "cannot store the context: " + ec.message());
  return ContextUpload{digest.str(), size};
}

Result<Sha256Digest> ImageManager::AssembleContext(const std::string& owner,
                                                   const Sha256Digest& archive, uint64_t size,
                                                   const std::vector<Sha256Digest>& chunks,
                                                   const std::string& prefix) {
  std::error_code ec;
  std::string whole = ContextPathOf(owner, archive);
  // Sent whole before (or as its only chunk): checked when a build unpacks it.
  if (fs::exists(whole, ec)) {
    fs::last_write_time(whole, fs::file_time_type::clock::now(), ec);
    for (const auto& c : chunks)
      if (c != archive) fs::remove(ContextPathOf(owner, c), ec);
    return archive;
  }
  std::string path = UploadPath();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    uint64_t total = 0;
    for (size_t i = 0; i < chunks.size(); ++i) {
      std::string field = prefix + ".archive.chunks[" + std::to_string(i) + "]";
      std::ifstream in(ContextPathOf(owner, chunks[i]), std::ios::binary);
      if (!in) {
        out.close();
        fs::remove(path, ec);
        return Status(
            Code::kInvalidRequest, field + ": " + chunks[i].str() + " was not uploaded by this key",
            json{{"issues",
                  json::array({{{"path", field}, {"message", "was not uploaded by this key"}}})}});
      }
      total += fs::file_size(ContextPathOf(owner, chunks[i]), ec);
      if (total > size) break;  // named below as a size mismatch; read no further
      out << in.rdbuf();
    }
    if (!out.flush() || total != size) {
      bool short_write = !out;
      out.close();
      fs::remove(path, ec);
      if (short_write) return Status(Code::kIoError, "cannot join the build context's chunks");
      std::string field = prefix + ".archive.size";
      return Status(
          Code::kInvalidRequest,
          field + ": the chunks hold " + (total > size ? "more than " : "") +
              std::to_string(total) + " bytes, not " + std::to_string(size),
          json{{"issues",
                json::array({{{"path", field}, {"message", "does not match the chunks"}}})}});
    }
  }
  Result<ContextUpload> put = PutContext(owner, archive, path);
  if (!put.ok()) {
    if (put.status().code() == Code::kInvalidRequest && put.status().details().contains("expected"))
      return Status(Code::kInvalidRequest,
                    prefix + ".archive.sha256: the chunks make " +
                        put.status().details().value("actual", std::string()) + ", not " +
                        archive.str(),
                    put.status().details());
    return put.status();
  }
  for (const auto& c : chunks)
    if (c != archive) fs::remove(ContextPathOf(owner, c), ec);
  return archive;
}

void ImageManager::ExpireContexts() {
  std::error_code ec;
  auto oldest = fs::file_time_type::clock::now() - std::chrono::milliseconds(kContextTtlMs);
  for (const auto& key_dir : fs::directory_iterator(storage_.dir() + "/contexts", ec)) {
    std::error_code ec2;
    for (const auto& e : fs::directory_iterator(key_dir.path(), ec2))
      if (e.last_write_time(ec2) < oldest) fs::remove(e.path(), ec2);
  }
}

bool ImageManager::RegistryAllowed(const ImageRef& ref) const {
  return std::any_of(options_.allowed_registries.begin(), options_.allowed_registries.end(),
                     [&](const RegistryPattern& p) { return p.Matches(ref); });
}

std::set<LayerId> ImageManager::LayersOf(const std::string& owner) {
  std::set<LayerId> held;
  if (std::optional<ImageRecord> builtin = Load(builtin_id_))
    held.insert(builtin->layers.begin(), builtin->layers.end());
  for (const ImageRecord& r : LoadAll(owner, std::nullopt, std::nullopt))
    held.insert(r.layers.begin(), r.layers.end());
  for (const auto& snap : sandboxes_.snapshots().List()) {
    if (snap.owner != owner) continue;
    for (const auto& l : snap.layers)
      if (std::optional<LayerId> id = LayerId::Parse(l)) held.insert(*id);
  }
  return held;
}

std::vector<store::RegistryCredential> ImageManager::Registries(const std::string& owner) {
  return catalog_.Registries(owner);
}

store::RegistryCredential ImageManager::SetRegistry(const std::string& owner,
                                                    store::RegistryCredential cred) {
  cred.created_ms = NowMs();
  catalog_.PutRegistry(owner, cred);
  return cred;
}

bool ImageManager::DeleteRegistry(const std::string& owner, const std::string& registry) {
  return catalog_.DeleteRegistry(owner, registry);
}

}  // namespace kiln::images
