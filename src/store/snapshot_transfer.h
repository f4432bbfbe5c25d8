// Moving a snapshot between hosts as one plain tar:
//
//   kiln-snapshot.json   {"format": "kiln-snapshot/1", "record": {...},
//                         "engine": runsc version, "base": base image name,
//                         "files": {path: {size, xxh3_128}}}
//   checkpoint/...       runsc's checkpoint files, each listed in "files"
//   layers/<sha256>.tar  for a snapshot of an image, each layer of its root
//                        the receiver may lack (manifest "layers", bottom to
//                        top: {"base": name} or {sha256, size, included})
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
#include <set>
#include <string>
#include <string_view>
#include <vector>

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

// One layer of an image snapshot's root, as the export sends it.
struct TransferLayer {
  // kiln's built-in base image (never sent: the receiver has its own, which
  // must be the same), or empty for a layer sent as a tar:
  std::string base;
  std::string sha256;  // of the layer's tar (images/layers/layer_export.h)
  uint64_t size = 0;   // the tar's length
  // Writes exactly `size` bytes of the tar; false if `write` did or the
  // layer could not be read.
  std::function<bool(const std::function<bool(std::string_view)>&)> write;
};

// What an import's layers became on this host.
struct ImportedRoot {
  std::string rootfs;               // the flattened root, restores' root
  std::vector<std::string> layers;  // its layer ids, bottom to top
};

// Where an import puts the image layers it receives: the image store
// (images/manager/image_transfer.cc), behind an interface so the store needs no
// images code and its tests can fake one. A layer is only ever named by the
// sha256 the import computed of the bytes it received, never by a name the
// tar gives: a tar cannot plant content under a digest another tenant's
// pull would trust.
class LayerSink {
 public:
  virtual ~LayerSink() = default;
  // True if this host holds a layer whose tar has this sha256.
  virtual bool Has(const std::string& sha256) = 0;
  // A layer's tar arrives in pieces (the import checks its sha256 itself).
  virtual Status Begin(const std::string& sha256, uint64_t size) = 0;
  virtual Status Data(std::string_view data) = 0;
  virtual Status End() = 0;
  // After every checksum matched: stores the layers received and flattens
  // the root of `layers` (bottom to top, as the manifest lists them).
  // Whatever it has not stored when it is destroyed is removed.
  virtual Result<ImportedRoot> Commit(const std::vector<TransferLayer>& layers) = 0;
};

// A snapshot's tar, prepared (files verified, checksums known) so that a
// failure is answered before any byte of the tar is sent.
class SnapshotExport {
 public:
  // `layers`: the root's layers for a snapshot of an image (empty for one
  // on the base image); those whose sha256 is in `skip` are listed but not
  // sent (the receiver has them). kSnapshotCorrupted, kSnapshotNotFound.
  static Result<SnapshotExport> Prepare(const SnapshotStore& store, const SnapshotRecord& record,
                                        const TransferHost& host,
                                        std::vector<TransferLayer> layers = {},
                                        const std::set<std::string>& skip = {});
  // The tar's exact length in bytes.
  uint64_t size() const { return size_; }
  // Writes the tar; stops (false) when `write` says the receiver is gone or a
  // file changed size or became unreadable meanwhile.
  bool Stream(const std::function<bool(std::string_view)>& write) const;

 private:
  std::string dir_;       // the snapshot's directory
  std::string manifest_;  // kiln-snapshot.json
  // The manifest's and layers' tar mtime: the snapshot's creation, so one
  // snapshot exports as the same bytes every time (not the export's clock).
  int64_t created_s_ = 0;
  std::map<std::string, uint64_t> files_;
  std::vector<TransferLayer> sent_;  // the layers in the tar
  uint64_t size_ = 0;
};

struct ImportRequest {
  std::string owner;  // the importing key
  TransferHost host;  // this daemon's
  int64_t now_ms = 0;
  // Checks what the store cannot (labels, network rules): an error is 400.
  std::function<Status(const SnapshotRecord&)> check_record;
  // Takes an image snapshot's layers; null: such a tar is refused (409).
  std::unique_ptr<LayerSink> layers;
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
  Status ReadLayers(const nlohmann::json& layers);
  Status CheckExisting();
  void Cleanup();

  SnapshotStore& store_;
  ImportRequest request_;
  int entries_ = 0;
  std::string entry_;  // the entry being read
  std::string manifest_text_;
  SnapshotRecord record_;
  nlohmann::json files_;  // as kiln-snapshot.json lists them
  std::map<std::string, bool> seen_;
  std::vector<TransferLayer> layers_;              // as the manifest lists them
  std::map<std::string, uint64_t> layer_entries_;  // entry name -> size, of those sent
  bool in_layer_ = false;                          // the entry is a layer's tar
  std::unique_ptr<Sha256> layer_hash_;
  std::optional<SnapshotRecord> existing_;  // same snapshot here: verify, write nothing
  bool dir_made_ = false;
  bool adopted_ = false;
  UniqueFd fd_;
  std::unique_ptr<Xxh3> hash_;
};

}  // namespace kiln::store
