// Snapshots on disk: <dir>/<id>/checkpoint/ holds runsc's checkpoint files,
// <dir>/<id>/manifest.json the record and an XXH3-128 of every file. A
// snapshot exists only once its manifest is written (after the capture is
// complete), and its files are verified against it before every restore.
//
// Verifying is hashing (~25 ms per 100 MB), so a file already found intact is
// not hashed again while its identity is unchanged: device, inode, size,
// mtime and ctime. Any write to a file changes its ctime, which no one can
// set back, so a file altered in place is hashed again and refused.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/run_as.h"
#include "common/shape.h"
#include "common/status.h"

namespace kiln::store {

// What a snapshot holds. kMemory: runsc's checkpoint (files, memory,
// running processes); a copy is a restore. kDisk: the root filesystem's
// changes only (kDiskUpperTar, in ExportUpper's form); a copy boots fresh
// from them, at the snapshot's shape or another.
enum class SnapshotMode { kMemory, kDisk };
const char* SnapshotModeName(SnapshotMode mode);  // "memory", "disk"
std::optional<SnapshotMode> ParseSnapshotMode(const std::string& name);
// A disk snapshot's one file in its checkpoint directory.
inline constexpr char kDiskUpperTar[] = "rootfs-upper.tar";

struct SnapshotRecord {
  std::string id;
  SnapshotMode mode = SnapshotMode::kMemory;
  std::string owner;  // the API key whose sandbox it captured
  std::optional<std::string> name;
  std::map<std::string, std::string> labels;
  std::string source_sandbox_id;
  Shape shape;
  int retention_days = 7;
  int64_t created_ms = 0;
  int64_t expires_ms = 0;
  uint64_t size_bytes = 0;
  int64_t capture_ms = 0;  // how long the source was paused
  // The source's egress rules ({internet, allow, deny}), which copies keep
  // unless their create or fork names others; null = internet off.
  nlohmann::json network;
  // The image the source ran (unset = the daemon's base image) and its root
  // filesystem ("" = the daemon's), which every restore must use again.
  std::optional<std::string> image;
  std::string rootfs;
  // An imported snapshot's image id on the host it came from: provenance
  // only. The sender chose it, so it is never `image` (which pins an image
  // of this host and names it to the sandboxes restored from it).
  std::optional<std::string> source_image;
  // An imported snapshot whose id another key's snapshot held here got an
  // id of its own: this is the id it came with. No key can squat an id
  // that another key's import needs.
  std::optional<std::string> source_id;
  // The layer ids rootfs was flattened from, for an imported snapshot of an
  // image (a local one's are its image's): kept from prune, and what an
  // export of it sends.
  std::vector<std::string> layers;
  // An image's warm copy (its booted, ready state): kept and deleted with
  // the image, never listed or billed as the key's snapshot, no expiry.
  bool image_warm = false;
  // A paused sandbox's checkpoint (its id here): never listed or restored as
  // a snapshot, billed to that sandbox, deleted when it wakes or stops.
  std::string paused_sandbox;
  // A fork's own capture, deleted once its copies started: never billed.
  bool temporary = false;
  // Its source ran with sudo off: the restored agent keeps that until told.
  bool sudo_off = false;
  // A disk snapshot's user (its image's): a copy boots fresh as it. Local
  // only: an imported disk snapshot's copies run as the default user.
  RunAs run_as;
  // Not the key's snapshot to list, restore or bill as one.
  bool hidden() const { return image_warm || !paused_sandbox.empty(); }
};

// The manifest's "record" (the key names are the stored format).
void to_json(nlohmann::json& j, const SnapshotRecord& r);
void from_json(const nlohmann::json& j, SnapshotRecord& r);

class SnapshotStore {
 public:
  // Loads the manifests found in `dir`; drops half-written snapshots.
  explicit SnapshotStore(std::string dir);

  // Where a capture for `id` must be written (the directory must not exist).
  std::string CheckpointDir(const std::string& id) const;
  // The snapshot's directory (manifest.json, checkpoint/).
  std::string SnapshotDir(const std::string& id) const { return dir_ + "/" + id; }
  // Where an import of `id` is written until every checksum matched
  // (snapshot_transfer.h); a starting store removes any it finds, so a
  // daemon killed mid-import leaves nothing listed or restorable.
  std::string ImportDir(const std::string& id) const { return dir_ + "/" + id + ".import-partial"; }
  // Makes a verified import a snapshot: writes its manifest into
  // ImportDir(record.id), renames the directory to the snapshot's and lists
  // it. `files` holds every file's size and xxh3_128. kSnapshotExists if the
  // id got taken meanwhile, kNoSpace, kIoError.
  Status AdoptImport(const SnapshotRecord& record, const nlohmann::json& files);
  // The manifest's files ({path: {size, xxh3_128}}) after Verify, with the
  // checksums the background hasher has not written yet computed now (an
  // export must name them before it sends a byte).
  Result<nlohmann::json> VerifiedFiles(const std::string& id) const;
  // Records a complete capture: writes the manifest (atomically) naming
  // every file with its size, and notes each file's identity, so the
  // snapshot can be restored at once; a background thread then checksums
  // the files (~25 ms per 100 MB) and rewrites the manifest with the sums.
  // A manifest left without them by a stopped daemon is completed when the
  // store next loads. On failure (kSnapshotFailed) the snapshot's files are
  // removed.
  Status Seal(const SnapshotRecord& record);
  // Checks every file against the manifest (missing, resized, altered);
  // files whose identity did not change since they were verified (or
  // sealed) are not hashed again. kSnapshotNotFound or kSnapshotCorrupted.
  Status Verify(const std::string& id) const;

  std::optional<SnapshotRecord> Get(const std::string& id) const;
  std::vector<SnapshotRecord> List() const;  // oldest first
  bool Delete(const std::string& id);
  // Deletes snapshots past their retention; returns their ids.
  std::vector<std::string> DeleteExpired(int64_t now_ms);
  // Removes a capture that never got sealed.
  void Discard(const std::string& id);

 private:
  // What identifies a file's content without reading it (see above).
  struct FileIdentity {
    uint64_t dev = 0, ino = 0, size = 0;
    int64_t mtime_ns = 0, ctime_ns = 0;
    bool operator==(const FileIdentity&) const = default;
  };
  static std::optional<FileIdentity> IdentityOf(const std::string& path);
  bool WriteManifest(const std::string& id, const nlohmann::json& manifest);
  // Adds an xxh3_128 to every entry of `files` that has no checksum; with
  // as_sealed, only to files unchanged since Seal noted their identity.
  bool HashFiles(const std::string& id, nlohmann::json* files, bool as_sealed);
  void HashLoop(std::stop_token stop);

  std::string dir_;
  mutable std::mutex mu_;
  std::map<std::string, std::pair<SnapshotRecord, nlohmann::json>> snapshots_;  // record, file sums
  // Path -> identity when it last hashed correctly (or was sealed).
  mutable std::map<std::string, FileIdentity> verified_;
  std::deque<std::string> to_hash_;  // sealed snapshots awaiting checksums
  std::condition_variable_any hash_cv_;
  std::jthread hasher_;  // last: stopped and joined first
};

}  // namespace kiln::store
