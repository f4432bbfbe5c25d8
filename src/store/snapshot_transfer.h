// Moving a snapshot between hosts as one plain tar:
//
//   kiln-snapshot.json   {"format": "kiln-snapshot/1", "record": {...},
//                         "engine": runsc version, "base": base image name,
//                         "files": {path: {size, xxh3_128}}}
//   checkpoint/...       runsc's checkpoint files, each listed in "files"
//
// The export streams the snapshot's own files; the import streams the body
// into <snapshots>/<id>.import-partial, hashing as it writes, and renames it
// into place only once every listed file arrived whole and matched its
// checksum. Anything else (not a tar, truncated, an unlisted or missing
// entry, a size or checksum mismatch, a link or a path leaving the
// snapshot) removes the partial directory, so nothing half-written is ever
// listed or restored. A checkpoint is runsc-version specific and its root
// must be the same base image, so both are checked before a byte is written.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/digest.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "store/snapshot_store.h"
#include "store/snapshot_tar.h"

namespace kiln::store {

inline constexpr char kSnapshotFormat[] = "kiln-snapshot/1";
inline constexpr char kSnapshotManifestEntry[] = "kiln-snapshot.json";

// What the checkpoint needs of the host it is restored on.
struct TransferHost {
  std::string engine_version;  // runsc's version
  std::string base_image;      // the base image's name ("base-<hash>")
};

// A snapshot's tar, prepared (files verified, checksums known) so that a
// failure is answered before any byte of the tar is sent.
class SnapshotExport {
 public:
  // kSnapshotCorrupted, kSnapshotNotFound, kNotSupported (a snapshot of an
  // image: its layers do not travel yet).
  static Result<SnapshotExport> Prepare(const SnapshotStore& store, const SnapshotRecord& record,
                                        const TransferHost& host);
  // The tar's exact length in bytes.
  uint64_t size() const { return size_; }
  // Writes the tar; stops (false) when `write` says the receiver is gone or a
  // file changed size or became unreadable meanwhile.
  bool Stream(const std::function<bool(std::string_view)>& write) const;

 private:
  std::string dir_;       // the snapshot's directory
  std::string manifest_;  // kiln-snapshot.json
  std::map<std::string, uint64_t> files_;
  uint64_t size_ = 0;
};

struct ImportRequest {
  std::string owner;  // the importing key
  TransferHost host;  // this daemon's
  int64_t now_ms = 0;
  // Checks what the store cannot (labels, network rules): an error is 400.
  std::function<Status(const SnapshotRecord&)> check_record;
};

struct ImportResult {
  SnapshotRecord record;
  bool created = false;  // false: the same snapshot was here already
};

// One import, pulling the request body as it arrives. The destructor removes
// whatever an unfinished or failed import wrote.
class SnapshotImport : private TarSink {
 public:
  SnapshotImport(SnapshotStore& store, ImportRequest request);
  ~SnapshotImport() override;
  SnapshotImport(const SnapshotImport&) = delete;
  SnapshotImport& operator=(const SnapshotImport&) = delete;

  // Reads the whole tar from `body` (libarchive, store/snapshot_tar.h),
  // checks that every listed file came whole, then lists the snapshot
  // (owner = the importing key). kInvalidArchive (the tar or its manifest),
  // kInvalidRequest (a record field), kSnapshotIncompatible,
  // kSnapshotExists, kNoSpace, kIoError; whatever `body` throws passes
  // through, with the partial directory removed. Call once.
  Result<ImportResult> Run(const TarSource& body);

 private:
  Result<ImportResult> Finish();
  Status BeginEntry(const std::string& name, uint64_t size) override;
  Status EntryData(std::string_view data) override;
  Status EndEntry() override;
  Status ReadManifest();
  void Cleanup();

  SnapshotStore& store_;
  ImportRequest request_;
  int entries_ = 0;
  std::string entry_;  // the entry being read
  std::string manifest_text_;
  SnapshotRecord record_;
  nlohmann::json files_;  // as kiln-snapshot.json lists them
  std::map<std::string, bool> seen_;
  std::optional<SnapshotRecord> existing_;  // same snapshot here: verify, write nothing
  bool dir_made_ = false;
  bool adopted_ = false;
  UniqueFd fd_;
  std::unique_ptr<Xxh3> hash_;
};

}  // namespace kiln::store
