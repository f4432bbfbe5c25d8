#include "images/manager/staged_builds.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/digest.h"
#include "common/ids.h"
#include "common/time.h"
#include "images/manager/image_manager.h"
#include "images/parse/image_ref.h"

namespace kiln::images {

namespace fs = std::filesystem;
using nlohmann::json;

StagedBuilds::StagedBuilds(ImageManager& images, std::string signing_key, std::string index_dir)
    : images_(images), links_(std::move(signing_key)), index_dir_(std::move(index_dir)) {
  std::error_code ec;
  fs::create_directories(index_dir_, ec);
}

void StagedBuilds::DropExpiredLocked(int64_t now_ms) {
  std::erase_if(reserved_, [&](const auto& entry) {
    return now_ms - entry.second.created_ms > kReservationTtlMs;
  });
}

Result<StagedBuilds::Reservation> StagedBuilds::Reserve(const std::string& owner,
                                                        const std::string& name,
                                                        const std::vector<std::string>& tags,
                                                        std::optional<Shape> shape) {
  if (Status s = ValidateImageName(name); !s.ok())
    return Status(Code::kInvalidRequest, "body.name: " + s.message(), json{{"field", "name"}});
  for (const auto& t : tags)
    if (Status s = ValidateTag(t); !s.ok())
      return Status(Code::kInvalidRequest, "body.tags: " + s.message(), json{{"field", "tags"}});
  int64_t now = NowMs();
  std::lock_guard lock(mu_);
  DropExpiredLocked(now);
  size_t held = std::count_if(reserved_.begin(), reserved_.end(),
                              [&](const auto& entry) { return entry.second.owner == owner; });
  if (held >= kMaxReserved)
    return Status(Code::kRateLimited,
                  "this key has " + std::to_string(kMaxReserved) +
                      " template builds requested and not started: start or drop some first")
        .WithRetryAfter(10);
  Reservation r{NewUuid(), owner, name, tags, shape, now};
  reserved_[r.build_id] = r;
  return r;
}

std::optional<StagedBuilds::Reservation> StagedBuilds::Reserved(const std::string& build_id,
                                                                const std::string& owner) {
  std::lock_guard lock(mu_);
  DropExpiredLocked(NowMs());
  auto it = reserved_.find(build_id);
  if (it == reserved_.end() || it->second.owner != owner) return std::nullopt;
  return it->second;
}

bool StagedBuilds::Reserves(const std::string& owner, const std::string& name) {
  std::lock_guard lock(mu_);
  DropExpiredLocked(NowMs());
  return std::any_of(reserved_.begin(), reserved_.end(), [&](const auto& entry) {
    return entry.second.owner == owner && entry.second.name == name;
  });
}

Result<ImageRecord> StagedBuilds::Submit(const std::string& build_id, const std::string& owner,
                                         ImageRequest request) {
  std::optional<Reservation> r = Reserved(build_id, owner);
  if (!r)
    return Status(Code::kNotFound, "build " + build_id + " was not requested by this key (or " +
                                       "its request expired): request the build again");
  request.id = Uuid::Parse(r->build_id);
  request.owner = r->owner;
  request.name = r->name;
  request.tags = r->tags;
  request.shape = r->shape;
  Result<ImageRecord> queued = images_.Submit(std::move(request));
  if (queued.ok()) {
    std::lock_guard lock(mu_);
    reserved_.erase(build_id);
  }
  return queued;
}

Status StagedBuilds::CheckHash(const std::string& hash, const std::string& field) {
  bool hex = hash.size() >= 32 && hash.size() <= 128 &&
             std::all_of(hash.begin(), hash.end(),
                         [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  if (!hex)
    return Status(Code::kInvalidRequest, field + ": a files hash is 32 to 128 lowercase hex digits",
                  json{{"field", field}});
  return Status::Ok();
}

std::string StagedBuilds::IndexPath(const std::string& owner, const std::string& hash) const {
  // Named by digests of the key's id and of the hash: no path from what a
  // client chose.
  return index_dir_ + "/" + Sha256Digest::Of(owner).hex() + "/" + Sha256Digest::Of(hash).hex();
}

std::optional<Sha256Digest> StagedBuilds::Piece(const std::string& owner, const std::string& hash) {
  std::string index = IndexPath(owner, hash);
  std::ifstream in(index);
  std::string hex;
  if (!(in >> hex)) return std::nullopt;
  std::optional<Sha256Digest> digest = Sha256Digest::FromHex(hex);
  if (!digest) return std::nullopt;
  // Asked for again, so kept another day; a context that expired takes its
  // index entry with it.
  if (!images_.MissingContexts(owner, {*digest}).empty()) {
    std::error_code ec;
    fs::remove(index, ec);
    return std::nullopt;
  }
  return digest;
}

Result<Sha256Digest> StagedBuilds::PutPiece(const std::string& owner, const std::string& hash,
                                            const std::string& path) {
  std::error_code ec;
  // The first upload of a hash stays while it is kept: a link seen by
  // someone else cannot replace what the key's builds read under it.
  if (std::optional<Sha256Digest> kept = Piece(owner, hash)) {
    fs::remove(path, ec);
    return *kept;
  }
  std::optional<Sha256Digest> digest = Sha256Digest::FromHex(FileSha256Hex(path));
  if (!digest) {
    fs::remove(path, ec);
    return Status(Code::kIoError, "cannot read the uploaded archive");
  }
  Result<ContextUpload> kept = images_.PutContext(owner, *digest, path);
  if (!kept.ok()) return kept.status();
  std::string index = IndexPath(owner, hash);
  fs::create_directories(fs::path(index).parent_path(), ec);
  std::string tmp = index + ".tmp-" + NewUuid();
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << digest->hex() << "\n";
    if (!out.flush()) {
      fs::remove(tmp, ec);
      return Status(Code::kIoError, "cannot record the uploaded archive");
    }
  }
  fs::rename(tmp, index, ec);
  if (ec) return Status(Code::kIoError, "cannot record the uploaded archive: " + ec.message());
  return *digest;
}

}  // namespace kiln::images
