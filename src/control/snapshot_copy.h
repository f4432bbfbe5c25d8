// The two ways a snapshot becomes a sandbox, and the capture of a disk
// snapshot: shared by creates, warm pools and snapshots (sandbox_manager.h).
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "engine/engine.h"
#include "store/snapshot_store.h"

namespace kiln::control {

// Starts a copy of `snapshot` (its files in `checkpoint_dir`) as
// `params.id`: a memory snapshot is restored (its processes run on), a disk
// snapshot boots fresh with its root filesystem's changes. `warm`: a
// restored copy's agent readies its first process (proto::kWarm).
Result<std::shared_ptr<engine::AgentChannel>> StartCopy(engine::Engine& engine,
                                                        engine::CreateParams params,
                                                        const store::SnapshotRecord& snapshot,
                                                        const std::string& checkpoint_dir,
                                                        bool warm);

// Writes what sandbox `id` changed in its root filesystem to
// `checkpoint_dir`/kDiskUpperTar. The sandbox runs on meanwhile (a process
// writing during the capture may be caught half-way, as with a backup of a
// live disk). On failure (kSnapshotFailed) `checkpoint_dir` does not exist.
Result<engine::CheckpointStats> CaptureDisk(engine::Engine& engine, const std::string& id,
                                            const std::string& checkpoint_dir);

}  // namespace kiln::control
