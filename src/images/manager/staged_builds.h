// Builds that arrive in parts, as vendors' template APIs send them (E2B's
// template builds): the build is reserved first, so its id is known before
// its steps; its files then arrive one archive at a time, each named by the
// client's own hash of what it holds; last, the build is submitted as an
// ImageRequest whose named contexts are those archives. One build path:
// what is submitted is an image build like any other (ImageManager's
// queue, cache, layers, quotas and per-key scoping).
//
// The rules this class owns:
// - Reservations: a key holds at most kMaxReserved unsubmitted builds, each
//   for kReservationTtlMs. They live in memory: after a kilnd restart the
//   client's next call about one is a 404, and it starts again.
// - Pieces: a key's archives by its hash, kept as the key's build contexts
//   (ImageManager::PutContext: the same per-key quota, unpack checks and a
//   day's expiry once unused). A hash is only a name the client chose: a
//   piece is found for the key that uploaded it, never for another.
// - Upload links (upload_links.h): the client may send a piece without its
//   API key (E2B's SDK PUTs to a presigned URL from a fresh client), so the
//   link carries its own credential for exactly that piece, at most
//   kMaxPieceBytes, for an hour.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/path_ids.h"
#include "common/shape.h"
#include "common/status.h"
#include "images/manager/image_record.h"
#include "images/manager/image_request.h"
#include "images/manager/upload_links.h"

namespace kiln::images {

class ImageManager;

class StagedBuilds {
 public:
  static constexpr size_t kMaxReserved = 64;
  static constexpr int64_t kReservationTtlMs = 3600 * 1000;
  static constexpr uint64_t kMaxPieceBytes = 100ull << 20;  // a build context's cap

  // `signing_key` signs upload links (a SecretBox::Derive of kilnd's);
  // `index_dir` keeps each key's hash -> context index (made if missing).
  StagedBuilds(ImageManager& images, std::string signing_key, std::string index_dir);

  struct Reservation {
    std::string build_id;  // a UUID, the image's id once submitted
    std::string owner;
    std::string name;               // the image's name
    std::vector<std::string> tags;  // the tags it takes when ready (empty: latest)
    std::optional<Shape> shape;     // its sandboxes' shape (ImageRequest::shape)
    int64_t created_ms = 0;
  };
  // A new reservation for `owner`. kInvalidRequest for a name or tag kiln
  // cannot take (naming it); kRateLimited once the key holds kMaxReserved.
  Result<Reservation> Reserve(const std::string& owner, const std::string& name,
                              const std::vector<std::string>& tags, std::optional<Shape> shape);
  // `owner`'s live reservation `build_id`, if any.
  std::optional<Reservation> Reserved(const std::string& build_id, const std::string& owner);
  // Whether `owner` holds a live reservation of a build of `name`.
  bool Reserves(const std::string& owner, const std::string& name);
  // Submits `request` as reservation `build_id` of `owner`: it takes the
  // reservation's id, owner, name, tags and shape; the reservation ends
  // when the build is queued. kNotFound for no such live reservation;
  // ImageManager::Submit's refusals.
  Result<ImageRecord> Submit(const std::string& build_id, const std::string& owner,
                             ImageRequest request);

  // `owner`'s piece of hash `hash`, while its context is kept (asking keeps
  // it another day); nullopt otherwise.
  std::optional<Sha256Digest> Piece(const std::string& owner, const std::string& hash);
  // Takes the archive at `path` (moved or removed) as `owner`'s piece
  // `hash`: PutContext's checks and quota; its digest. A piece of that hash
  // the key has already is kept, and the upload dropped.
  Result<Sha256Digest> PutPiece(const std::string& owner, const std::string& hash,
                                const std::string& path);
  // A piece's hash as clients send them: 32 to 128 lowercase hex digits
  // (E2B's SHA-256, another vendor's MD5). kInvalidRequest naming `field`.
  static Status CheckHash(const std::string& hash, const std::string& field);

  // The links a piece is uploaded by: scope a template, `what` its hash.
  const UploadLinks& links() const { return links_; }

 private:
  std::string IndexPath(const std::string& owner, const std::string& hash) const;
  void DropExpiredLocked(int64_t now_ms);

  ImageManager& images_;
  const UploadLinks links_;
  const std::string index_dir_;
  std::mutex mu_;
  std::map<std::string, Reservation> reserved_;  // by build id
};

}  // namespace kiln::images
