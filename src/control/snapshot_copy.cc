#include "control/snapshot_copy.h"

#include <filesystem>
#include <system_error>

#include "common/time.h"

namespace kiln::control {

namespace fs = std::filesystem;

Result<std::shared_ptr<engine::AgentChannel>> StartCopy(engine::Engine& engine,
                                                        engine::CreateParams params,
                                                        const store::SnapshotRecord& snapshot,
                                                        const std::string& checkpoint_dir) {
  if (snapshot.mode == store::SnapshotMode::kMemory) return engine.Restore(params, checkpoint_dir);
  params.rootfs_upper_tar = checkpoint_dir + "/" + store::kDiskUpperTar;
  return engine.Create(params);
}

Result<engine::CheckpointStats> CaptureDisk(engine::Engine& engine, const std::string& id,
                                            const std::string& checkpoint_dir) {
  auto fail = [](std::string message) { return Status(Code::kSnapshotFailed, std::move(message)); };
  std::error_code ec;
  if (fs::exists(checkpoint_dir, ec)) return fail(checkpoint_dir + " exists");
  // Written under a temporary name and renamed when complete, as a memory
  // capture is: nothing half-written ever looks like a snapshot.
  std::string tmp = checkpoint_dir + ".partial";
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return fail("cannot create " + tmp + ": " + ec.message());
  engine::CheckpointStats stats;
  int64_t t0 = MonotonicNowMs();
  Status exported = engine.ExportUpper(id, tmp + "/" + store::kDiskUpperTar);
  stats.duration_ms = MonotonicNowMs() - t0;
  if (exported.ok()) {
    stats.bytes = fs::file_size(tmp + "/" + store::kDiskUpperTar, ec);
    if (!ec) fs::rename(tmp, checkpoint_dir, ec);
  }
  if (!exported.ok() || ec) {
    fs::remove_all(tmp, ec);
    return fail("the disk capture failed: " +
                (exported.ok() ? std::string("cannot keep its tar") : exported.message()));
  }
  return stats;
}

}  // namespace kiln::control
