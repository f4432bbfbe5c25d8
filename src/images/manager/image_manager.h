// Images as a per-key resource: builds from recipes and Dockerfiles, pulls
// of OCI images, their versions and tags, logs, warm copies, storage and
// clean-up. The API calls it; it builds with sandboxes of the control plane
// (each RUN is a kiln sandbox, under the same capacity, metering and egress
// rules as any other) and stores layers in ImageStorage.
//
// An image is an ImageRecord (image_record.h): store::ImageCatalog keeps it
// as JSON, converted at this class's edge; the API renders it as ImageInfo.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/run_as.h"
#include "common/shape.h"
#include "common/status.h"
#include "control/sandbox_manager.h"
#include "control/snapshot_transfer_service.h"
#include "egress/resolver.h"
#include "engine/engine.h"
#include "images/manager/build_host.h"
#include "images/manager/build_log.h"
#include "images/manager/image_record.h"
#include "images/manager/image_request.h"
#include "images/manager/image_storage.h"
#include "images/parse/image_ref.h"
#include "images/parse/registry_mirror.h"
#include "images/parse/registry_pattern.h"
#include "store/image_catalog.h"
#include "store/snapshot_transfer.h"

namespace kiln::images {

struct ImageManagerOptions {
  std::string store_dir;           // <state dir>/image-store
  std::string base_rootfs;         // the built-in image's root (kiln's base)
  uint64_t storage_limit_mib = 0;  // --image-storage-mib; 0 = no limit
  int builds_at_once = 2;
  Shape warm_shape;  // creates of this shape restore the warm copy
  std::string skopeo = "skopeo";
  // Pulls resolve registry names here and never dial the host's own
  // addresses (registry_network.h); null = the system's resolver.
  egress::Resolver* resolver = nullptr;
  egress::HostAddresses* host_addresses = nullptr;
  // --allow-registry: registries (a host on any port, or host:port) pulled
  // from directly, also when private or on loopback; plain HTTP for those
  // on loopback. Any other registry: HTTPS to public addresses only.
  std::vector<RegistryPattern> allowed_registries;
  // --registry-mirror: pull-through mirrors, one per registry, asked first
  // (image_puller.h); a mirror is reached under the rules above.
  std::vector<RegistryMirror> mirrors;
  uint64_t context_quota_bytes = 2ull << 30;  // --context-storage-mib, per key
};

// What a sandbox made from an image needs.
struct ImageLaunch {
  std::string image_id;
  std::string rootfs;
  RunAs run_as;
  // The warm copy to restore, when the create's shape is the warm shape.
  std::optional<std::string> warm_snapshot;
  std::optional<StartSpec> start;  // run at a cold boot (a warm copy has it running)
  nlohmann::json warm_start;       // {processId, readyMs} of the warm copy's start
  bool sudo = true;                // false: the image turns the sudo shim off
  Shape shape;                     // the sandbox's (ForSandbox)
};

struct ContextUpload {
  std::string digest;  // "sha256:<hex>"
  uint64_t size_bytes = 0;
};

class ImageManager : private BuildHost, public control::SnapshotLayers {
 public:
  // Registers the built-in image, marks builds a stopped daemon left
  // unfinished as failed, and starts the build workers.
  ImageManager(ImageManagerOptions options, store::ImageCatalog& catalog,
               control::SandboxManager& sandboxes, engine::Engine& engine);
  ~ImageManager();  // Shutdown()

  // The built-in image's id: what a create naming no image runs.
  const std::string& builtin_id() const { return builtin_id_; }

  // Daemon shutdown (before the sandboxes stop): builds in progress stop
  // and are recorded as interrupted; waits for them.
  void Shutdown();

  // Checks the request (a Dockerfile's syntax with line numbers, that its
  // bases and context exist) and queues the build. Returns the record.
  Result<ImageRecord> Submit(ImageRequest request);

  // An image visible to `owner` (its own or the built-in), by id; nullopt
  // owner = any. kImageNotFound.
  Result<ImageRecord> Get(const std::string& id, const std::optional<std::string>& owner);
  // By id, "name" (its latest), "name:tag" or "name@version".
  Result<ImageRecord> Resolve(const std::string& ref, const std::optional<std::string>& owner);
  // Newest first; deleted images only when `state` asks for them.
  std::vector<ImageRecord> List(const std::optional<std::string>& owner,
                                const std::optional<std::string>& name,
                                const std::optional<ImageState>& state);
  Result<ImageRecord> Tag(const std::string& id, const std::string& tag,
                          const std::optional<std::string>& owner);
  Result<ImageRecord> Untag(const std::string& id, const std::string& tag,
                            const std::optional<std::string>& owner);
  // Cancels a build in progress; drops the warm copy and tags; layers stay
  // while sandboxes or snapshots use the image.
  Result<ImageRecord> Delete(const std::string& id, const std::optional<std::string>& owner);

  Result<LogPage> Logs(const std::string& id, const std::optional<std::string>& owner,
                       int64_t after, size_t limit,
                       std::optional<std::chrono::steady_clock::time_point> follow_until);

  // Warm pool of a ready image (its warm copy's pool): read, pinned at
  // `size`, or given back to demand (`to_auto`).
  Result<control::PoolStatus> Pool(const std::string& id, const std::optional<std::string>& owner,
                                   std::optional<int> size, bool to_auto = false);

  // Build contexts, per key: a key builds only from contexts it uploaded
  // itself (a digest is no proof of having the bytes), within
  // --context-storage-mib; a context unused for kContextTtlMs is removed.
  static constexpr int64_t kContextTtlMs = 24 * 3600 * 1000;
  // Which of `digests` `owner` has not uploaded.
  std::vector<Sha256Digest> MissingContexts(const std::string& owner,
                                            const std::vector<Sha256Digest>& digests);
  // Takes the uploaded file at `path` (moved) if its sha256 is `digest`.
  // A whole context (a gzipped tar) is unpacked once to check it; a chunk
  // (`chunk`: a piece of one, as Runtime's client uploads them) only when
  // AssembleContext joins it to the others.
  Result<ContextUpload> PutContext(const std::string& owner, const Sha256Digest& digest,
                                   const std::string& path, bool chunk = false);
  // Joins `owner`'s uploaded `chunks`, in order, into the context `archive`
  // of `size` bytes, checked as PutContext checks an upload; the chunks go.
  // Errors name the field: `prefix`.archive.chunks[i] (not uploaded),
  // `prefix`.archive.sha256 or .size (what the chunks make is not it).
  Result<Sha256Digest> AssembleContext(const std::string& owner, const Sha256Digest& archive,
                                       uint64_t size, const std::vector<Sha256Digest>& chunks,
                                       const std::string& prefix);
  std::string UploadPath();
  // Where `owner`'s context `digest` is kept.
  std::string ContextPathOf(const std::string& owner, const Sha256Digest& digest) const;
  // Whether --allow-registry names `ref`'s registry host.
  bool RegistryAllowed(const ImageRef& ref) const;
  // The layers `owner` holds: its images' and its snapshots' (and kiln's
  // base). A layer another key pulled is not among them, whatever its
  // digest: a pull or an import unpacks (and so proves) it first.
  std::set<LayerId> LayersOf(const std::string& owner);

  std::vector<store::RegistryCredential> Registries(const std::string& owner);
  store::RegistryCredential SetRegistry(const std::string& owner, store::RegistryCredential cred);
  bool DeleteRegistry(const std::string& owner, const std::string& registry);

  // Drops the build cache, unused layers, roots and contexts.
  nlohmann::json Prune();

  // Resolves a create's `image`; kImageNotFound, kBuildInProgress (not
  // ready yet) or kInvalidRequest (failed or deleted). The sandbox's shape
  // is `shape` where `given` names it, else the image's own (its
  // ImageRecord::shape, else kilnd's default shape); a sandbox of the
  // image's warm shape restores its warm copy.
  Result<ImageLaunch> ForSandbox(const std::string& ref, const std::optional<std::string>& owner,
                                 const Shape& shape,
                                 const ShapeGiven& given = ShapeGiven{true, true, true});
  // Starts an image's start command in a freshly booted sandbox and waits
  // until it is ready; the create answer's `start`.
  nlohmann::json StartIn(const std::shared_ptr<control::Sandbox>& sandbox, const StartSpec& start);

  // Moving snapshots of images between hosts (image_transfer.cc, for
  // control::SnapshotTransferService): the
  // layers an export of `snapshot` sends (each layer's export digest is
  // computed once and kept), kNotSupported if they are gone.
  Result<std::vector<store::TransferLayer>> TransferLayers(
      const store::SnapshotRecord& snapshot) override;
  // Where an import by `owner` puts the layers it receives; the layers it
  // may leave out are those `owner` holds (LayersOf).
  std::unique_ptr<store::LayerSink> NewLayerSink(const std::string& owner) override;
  // [{sha256, bytes}]: the layer digests an import here can skip.
  nlohmann::json TransferableLayers() override;

 private:
  // A build queued or running.
  struct Job {
    ImageRequest request;
    std::string image_id;
    std::atomic<bool> cancelled{false};
  };
  void RegisterBuiltin();
  void Recover();
  void Worker(std::stop_token stop);
  void RunJob(const std::shared_ptr<Job>& job);
  Status Build(Job& job, ImageRecord& record);
  Status Warm(Job& job, ImageRecord& record);
  // The shape of `record`'s warm copy: its own, else kilnd's default.
  Shape WarmShapeOf(const ImageRecord& record) const {
    return record.shape.value_or(options_.warm_shape);
  }
  Status Fail(Job& job, ImageRecord& record, const Status& why);
  std::shared_ptr<BuildLog> LogOf(const std::string& image_id);
  bool Visible(const ImageRecord& record, const std::optional<std::string>& owner) const;
  Result<ImageRecord> Owned(const std::string& id, const std::optional<std::string>& owner);
  // The catalog's records, read and written as ImageRecords.
  std::optional<ImageRecord> Load(const std::string& id) const;
  std::vector<ImageRecord> LoadAll(const std::optional<std::string>& owner,
                                   const std::optional<std::string>& name,
                                   const std::optional<ImageState>& state) const;
  void Save(const ImageRecord& record);
  // Removes layers and roots nothing uses (see Prune); with cache, the
  // build cache too.
  nlohmann::json CollectGarbage(bool cache, bool contexts);
  Status CheckQuota();
  // Keeps a layer from collection while builds run.
  void Pin(const LayerId& layer);
  // Removes contexts unused for kContextTtlMs (all of a key's when `owner`
  // is unset: every key's).
  void ExpireContexts();
  // Warms the built-in image once, in the background.
  void WarmBuiltinLater();

  // BuildHost (image_build_host.cc): what its builds may reach.
  ImageStorage& Layers() override { return storage_; }
  void PinLayer(const LayerId& layer) override { Pin(layer); }
  Status CheckStoreQuota() override { return CheckQuota(); }
  std::optional<std::string> CachedStep(const std::string& owner, const std::string& key) override;
  void CacheStep(const std::string& owner, const std::string& key, const LayerId& layer) override;
  Result<ImageRecord> FindImage(const std::string& ref, const std::string& owner) override {
    return Resolve(ref, owner);
  }
  std::string ContextPath(const std::string& owner, const Sha256Digest& digest) override {
    return ContextPathOf(owner, digest);
  }
  std::set<LayerId> HeldLayers(const std::string& owner) override { return LayersOf(owner); }
  RegistryAccess Registry(const std::string& owner, const ImageRef& ref) override;
  Result<SandboxStepExit> RunInSandbox(const SandboxStep& step) override;

  ImageManagerOptions options_;
  store::ImageCatalog& catalog_;
  control::SandboxManager& sandboxes_;
  engine::Engine& engine_;
  ImageStorage storage_;
  std::string builtin_id_;

  std::mutex mu_;
  std::condition_variable_any cv_;
  // Builds waiting for a worker; a worker takes the oldest of the key with
  // the fewest running, the key served longest ago first, and a key queues
  // at most kQueuedPerKey.
  static constexpr int kQueuedPerKey = 64;
  std::deque<std::shared_ptr<Job>> queue_;
  std::map<std::string, int> building_;         // running builds by key
  std::map<std::string, int64_t> last_served_;  // by key: when a worker last took its build
  int64_t served_ = 0;
  std::map<std::string, std::shared_ptr<Job>> jobs_;  // queued or running, by image id
  std::map<std::string, std::shared_ptr<BuildLog>> logs_;
  // The logs of the last few ended builds read (newest last): a client
  // paging through a long log would otherwise have its file parsed again on
  // every request (a 16 MiB log takes seconds in the sanitized daemon).
  static constexpr size_t kEndedLogsKept = 4;
  std::deque<std::pair<std::string, std::shared_ptr<BuildLog>>> ended_logs_;
  void KeepEndedLocked(const std::string& image_id, std::shared_ptr<BuildLog> log);
  std::set<std::string> pinned_layers_;  // used by running builds
  std::atomic<int> imports_{0};          // snapshot imports with a layer sink alive
  bool warming_base_ = false;
  std::atomic<bool> closing_{false};
  std::jthread warmer_;
  std::vector<std::jthread> workers_;  // last: stopped and joined first
};

}  // namespace kiln::images
