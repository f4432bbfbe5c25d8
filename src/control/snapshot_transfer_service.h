// Moving snapshots between hosts, as a service the fronts call: export a
// snapshot as one tar, import one (the tar's format and its checks:
// store/snapshot_transfer.h).
//
// It owns what a front must not decide: which host a checkpoint fits (this
// engine's version, this base image), where an image snapshot's layers come
// from and go (SnapshotLayers), the checks of an imported record that the
// store cannot make (labels and network rules, as a create's body has
// them), the size of an import, and what an import makes of the snapshot
// (the importing key's, metered and pooled as a fresh capture). A front
// reads the request, calls it, and renders the answer.
//
// It holds references only: cheap to make where it is needed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "control/sandbox_manager.h"
#include "store/snapshot_store.h"
#include "store/snapshot_transfer.h"

namespace kiln::control {

// Where an image snapshot's root layers come from (export) and go (import):
// the image store (images::ImageManager), behind an interface because the
// control plane sits below images.
class SnapshotLayers {
 public:
  virtual ~SnapshotLayers() = default;
  // The layers of the snapshot's root, bottom to top, ready to send.
  virtual Result<std::vector<store::TransferLayer>> TransferLayers(
      const store::SnapshotRecord& snapshot) = 0;
  // Where an import by `owner` puts the layers it receives.
  virtual std::unique_ptr<store::LayerSink> NewLayerSink(const std::string& owner) = 0;
  // The layer digests an import here may leave out of its tar.
  virtual nlohmann::json TransferableLayers() = 0;
};

// An imported snapshot's tar is at most this long. An image's layers
// travel in it too; the disk and the image storage quota bound it first.
inline constexpr uint64_t kMaxImportBytes = 64ull << 30;

// An imported record's labels and network rules, under the rules of a
// create's body (the same limits, the same messages, naming the field as
// "body.<field>"): kInvalidArchive "kiln-snapshot.json: record: ..." with
// details {"issues": [{"path", "message"}]}, or OK.
Status CheckImportedRecord(const store::SnapshotRecord& record);

class SnapshotTransferService {
 public:
  // `layers`: null when this kilnd keeps no images (an export then sends no
  // layers; an import of an image snapshot is refused). Both outlive it.
  SnapshotTransferService(SandboxManager& sandboxes, SnapshotLayers* layers)
      : sandboxes_(sandboxes), layers_(layers) {}

  // The tar of `snapshot` (found by the caller, under its visibility),
  // prepared so that a failure is answered before any byte is sent. Layers
  // whose sha256 is in `skip_layers` are listed but not sent.
  // kSnapshotCorrupted, kSnapshotNotFound, or what TransferLayers says.
  Result<store::SnapshotExport> Export(const store::SnapshotRecord& snapshot,
                                       const std::set<std::string>& skip_layers);

  // Imports the tar `body` as `owner`'s snapshot. `declared_bytes`: the
  // body's length if the client said it (kPayloadTooLarge over
  // kMaxImportBytes, before a byte is read). Runs on the calling thread, at
  // a lower CPU priority than the sandboxes. A new snapshot is metered from
  // now and given the default pool; `created` false: the same snapshot was
  // here already. The errors of store::SnapshotImport::Run; whatever `body`
  // throws passes through, with nothing of the import left.
  Result<store::ImportResult> Import(const std::string& owner,
                                     std::optional<uint64_t> declared_bytes,
                                     const store::TarSource& body);

  // The layer digests an import here may leave out (none without images).
  nlohmann::json TransferableLayers();

 private:
  // What a checkpoint needs of the host it is restored on: this one.
  store::TransferHost Host() const;

  SandboxManager& sandboxes_;
  SnapshotLayers* layers_;
};

}  // namespace kiln::control
