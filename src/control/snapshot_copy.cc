#include "control/snapshot_copy.h"

#include <filesystem>
#include <system_error>

#include "common/log.h"
#include "common/time.h"
#include "engine/agent_client.h"

namespace kiln::control {

namespace fs = std::filesystem;

// A fork and a reap; more means the copy is in trouble, which the create's
// own first call will find.
constexpr int kWarmTimeoutMs = 2000;

Result<std::shared_ptr<engine::AgentChannel>> StartCopy(engine::Engine& engine,
                                                        engine::CreateParams params,
                                                        const store::SnapshotRecord& snapshot,
                                                        const std::string& checkpoint_dir,
                                                        bool warm) {
  if (snapshot.mode == store::SnapshotMode::kMemory) {
    auto restored = engine.Restore(params, checkpoint_dir);
    // Every copy, pooled or not, is warmed the same way, so all copies of a
    // snapshot stay alike (the same next PID). An agent captured before
    // agent.warm existed says so, and its copy starts as before.
    if (restored.ok() && warm) {
      auto warmed = engine::AgentClient(*restored).Warm(kWarmTimeoutMs);
      if (!warmed.ok() && warmed.status().code() != Code::kInvalidRequest)
        LogWarn("a restored copy did not warm",
                {{"sandboxId", params.id}, {"error", warmed.status().ToString()}});
    }
    return restored;
  }
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
