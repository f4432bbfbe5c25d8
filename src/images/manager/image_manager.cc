#include "images/manager/image_manager.h"

#include <algorithm>
#include <filesystem>

#include "common/digest.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "images/layers/flatten.h"
#include "images/manager/builder.h"
#include "images/parse/dockerfile.h"
#include "images/parse/image_ref.h"
#include "images/parse/recipe.h"

namespace kiln::images {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kBuiltinName = "base";

// A UUID-shaped id that is the same for the same text (the built-in image's).
std::string StableUuid(const std::string& text) {
  std::string h = Sha256Hex(text);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-4" + h.substr(13, 3) + "-8" + h.substr(17, 3) +
         "-" + h.substr(20, 12);
}

}  // namespace

ImageManager::ImageManager(ImageManagerOptions options, store::ImageCatalog& catalog,
                           control::SandboxManager& sandboxes, engine::Engine& engine)
    : options_(std::move(options)),
      catalog_(catalog),
      sandboxes_(sandboxes),
      engine_(engine),
      storage_(options_.store_dir) {
  RegisterBuiltin();
  Recover();
  for (int i = 0; i < std::max(1, options_.builds_at_once); ++i)
    workers_.emplace_back([this](std::stop_token stop) { Worker(stop); });
}

ImageManager::~ImageManager() { Shutdown(); }

void ImageManager::Shutdown() {
  closing_ = true;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, job] : jobs_) job->cancelled = true;
  }
  for (auto& w : workers_) w.request_stop();
  cv_.notify_all();
  workers_.clear();
  if (warmer_.joinable()) warmer_.join();
  // Builds still queued never started: they end as interrupted too.
  std::deque<std::shared_ptr<Job>> queued;
  {
    std::lock_guard lock(mu_);
    queued.swap(queue_);
  }
  for (auto& job : queued) {
    if (std::optional<ImageRecord> record = Load(job->image_id))
      (void)Fail(*job, *record, Status(Code::kShuttingDown, "kilnd stopped before the build ran"));
  }
}

void ImageManager::RegisterBuiltin() {
  std::string name = fs::path(options_.base_rootfs).filename();
  std::optional<LayerId> parsed = LayerId::Parse(name);
  // store::EnsureBaseImage names it base-<16 hex of its recipe>.
  if (!parsed) throw std::invalid_argument("the base image folder " + name + " is not base-<hash>");
  LayerId layer = *parsed;
  builtin_id_ = StableUuid("kiln-builtin:" + name);
  // The base image is a layer of its own: a link to kiln's root, whose root
  // (see ImageStorage::EnsureRoot) is that directory itself.
  std::string link = storage_.LayerDir(layer);
  if (!fs::exists(link + ".json")) {
    std::error_code ec;
    fs::remove(link, ec);
    fs::create_symlink(options_.base_rootfs, link, ec);
    std::ofstream(link + ".json") << json{
        {"bytes", DiskUsage(options_.base_rootfs)},
        {"files", 0}}.dump();
  }
  if (catalog_.Get(builtin_id_)) return;
  OciConfig config;
  RunAs d;
  config.user = d.user;
  config.working_dir = d.workdir;
  config.env = d.env;
  int64_t now = NowMs();
  ImageRecord record;
  record.id = builtin_id_;
  record.name = kBuiltinName;
  record.state = ImageState::kReady;
  record.source = ImageSource::kBuiltin;
  record.layers = {layer};
  record.chain_id = ImageStorage::ChainId({layer}).hex();
  record.digest = "sha256:" + Sha256Hex(name);
  record.size_bytes = storage_.Layer(layer) ? storage_.Layer(layer)->bytes : 0;
  record.config = config;
  record.run_as = d;
  record.created_ms = record.ready_ms = record.ended_ms = now;
  catalog_.Insert(record, {"latest"});
}

void ImageManager::Recover() {
  std::set<std::string> interrupted;
  for (ImageRecord& record : LoadAll(std::nullopt, std::nullopt, std::nullopt)) {
    if (record.state == ImageState::kQueued || record.state == ImageState::kBuilding) {
      interrupted.insert(record.id);
      record.state = ImageState::kFailed;
      record.error = {{"code", "build_interrupted"},
                      {"message", "kilnd stopped during the build; build it again"}};
      record.ended_ms = NowMs();
      Save(record);
      LogOf(record.id)->Close();
    } else if (record.state == ImageState::kDeleting) {
      record.state = ImageState::kDeleted;
      Save(record);
    }
  }
  // The sandboxes of those builds (a step's, the warm boot) kept running
  // and were re-adopted; no one will use them.
  for (const auto& s : sandboxes_.List(control::ListFilter{})) {
    if (s->spec().image && interrupted.count(*s->spec().image)) sandboxes_.Delete(s->id());
  }
}

std::shared_ptr<BuildLog> ImageManager::LogOf(const std::string& image_id) {
  std::lock_guard lock(mu_);
  if (auto it = logs_.find(image_id); it != logs_.end()) return it->second;
  const bool running = jobs_.count(image_id) > 0;
  if (!running) {
    for (const auto& [ended_id, log] : ended_logs_) {
      if (ended_id == image_id) return log;
    }
  }
  std::optional<Uuid> id = Uuid::Parse(image_id);  // kilnd's own ids; anything else has no log
  auto log = std::make_shared<BuildLog>(id ? storage_.LogPath(*id) : "/dev/null");
  // Builds that are queued or running keep theirs in memory (their followers
  // wait on it); an ended build's is read from its file, and kept a while.
  if (running) {
    logs_[image_id] = log;
  } else if (id) {
    KeepEndedLocked(image_id, log);
  }
  return log;
}

void ImageManager::KeepEndedLocked(const std::string& image_id, std::shared_ptr<BuildLog> log) {
  // A read between a build's insert and its job's start kept a copy too
  // early; the build's own log replaces it.
  std::erase_if(ended_logs_, [&](const auto& e) { return e.first == image_id; });
  ended_logs_.emplace_back(image_id, std::move(log));
  if (ended_logs_.size() > kEndedLogsKept) ended_logs_.pop_front();
}

bool ImageManager::Visible(const ImageRecord& record,
                           const std::optional<std::string>& owner) const {
  return !owner || record.owner.empty() || record.owner == *owner;
}

Result<ImageRecord> ImageManager::Owned(const std::string& id,
                                        const std::optional<std::string>& owner) {
  Result<ImageRecord> record = Get(id, owner);
  if (!record.ok()) return record;
  if (record->owner.empty() && owner)
    return Status(Code::kForbidden, "the built-in image cannot be changed");
  return record;
}

std::optional<ImageRecord> ImageManager::Load(const std::string& id) const {
  std::optional<json> stored = catalog_.Get(id);
  if (!stored) return std::nullopt;
  return stored->get<ImageRecord>();
}

std::vector<ImageRecord> ImageManager::LoadAll(const std::optional<std::string>& owner,
                                               const std::optional<std::string>& name,
                                               const std::optional<ImageState>& state) const {
  std::optional<std::string> state_name;
  if (state) state_name = std::string(ImageStateName(*state));
  std::vector<ImageRecord> out;
  for (const json& stored : catalog_.List(owner, name, state_name))
    out.push_back(stored.get<ImageRecord>());
  return out;
}

void ImageManager::Save(const ImageRecord& record) { catalog_.Update(record); }

Result<ImageRecord> ImageManager::Submit(ImageRequest req) {
  {
    // One key cannot fill the line every key's builds wait in.
    std::lock_guard lock(mu_);
    auto mine = std::count_if(queue_.begin(), queue_.end(),
                              [&](const auto& job) { return job->request.owner == req.owner; });
    if (mine >= kQueuedPerKey)
      return Status(Code::kRateLimited, "this key has " + std::to_string(kQueuedPerKey) +
                                            " builds queued already: retry once some have run")
          .WithRetryAfter(5);
  }
  std::string id = req.id ? req.id->str() : NewUuid();
  if (req.id && catalog_.Get(id))
    return Status(Code::kInvalidRequest, "image " + id + " exists already", json{{"imageId", id}});
  if (req.name.empty()) {
    // An unnamed image is addressed by its id: its name is the id (shown as
    // null), it has no versions to move a tag between.
    if (!req.tags.empty())
      return Status(Code::kInvalidRequest, "body.tags: an unnamed image has no tags; give a name");
    req.name = id;
  } else {
    if (Status s = ValidateImageName(req.name); !s.ok()) return s;
    if (req.name == kBuiltinName || req.name == "runtime")
      return Status(Code::kInvalidRequest,
                    "body.name: \"" + req.name + "\" names the built-in image");
    if (req.tags.empty()) req.tags = {"latest"};
  }
  for (const auto& t : req.tags)
    if (Status s = ValidateTag(t); !s.ok()) return s;
  // What can be checked now is: a build that would fail at its first step
  // is refused with the reason instead of queued.
  auto need_base = [&](const std::string& base, const std::string& where) -> Status {
    if (base == "scratch" || IsRegistryRef(base)) return Status::Ok();
    Result<ImageRecord> found = Resolve(base, req.owner);
    if (!found.ok())
      return Status(Code::kImageNotFound, where + ": image " + base + " not found",
                    json{{"image", base}});
    if (found->state == ImageState::kFailed || found->state == ImageState::kDeleted)
      return Status(Code::kImageNotFound,
                    where + ": image " + base + " is " + std::string(ImageStateName(found->state)),
                    json{{"image", base}});
    return Status::Ok();
  };
  int steps_total = 1;  // an image source: its pull
  if (req.source == ImageSource::kDockerfile) {
    Result<Dockerfile> file = ParseDockerfile(req.dockerfile, req.build_args);
    if (!file.ok()) return file.status();
    Result<std::vector<int>> order = StagesFor(*file, req.target);
    if (!order.ok()) return order.status();
    steps_total = 0;
    for (int s : *order) steps_total += 1 + static_cast<int>(file->stages[s].steps.size());
    for (int s : *order) {
      const Stage& st = file->stages[s];
      if (st.base_stage) continue;
      if (Status ok = need_base(st.base, "Dockerfile line " + std::to_string(st.line)); !ok.ok())
        return ok;
    }
    if (req.context && !fs::exists(ContextPathOf(req.owner, *req.context)))
      return Status(Code::kInvalidRequest,
                    "body.context: " + req.context->str() +
                        " was not uploaded (PUT /v1/images/context/sha256:<hex> first)");
    for (const auto& [name, digest] : req.named_contexts) {
      if (Status s = ValidateContextName(name); !s.ok()) return s;
      if (!fs::exists(ContextPathOf(req.owner, digest)))
        return Status(Code::kInvalidRequest,
                      "context " + name + ": " + digest.str() + " was not uploaded by this key",
                      json{{"context", name}});
    }
  } else if (req.source == ImageSource::kRecipe) {
    Result<RecipeBuild> recipe = RecipeToBuild(req.recipe);
    if (!recipe.ok()) return recipe.status();
    if (Result<Dockerfile> file = ParseDockerfile(recipe->dockerfile, {}); file.ok()) {
      steps_total = 0;
      for (const auto& st : file->stages) steps_total += 1 + static_cast<int>(st.steps.size());
    }
    if (Status ok = need_base(req.recipe.value("base", kBuiltinName), "body.recipe.base"); !ok.ok())
      return ok;
  } else if (req.source == ImageSource::kImage && !req.image_ref) {
    return Status(Code::kInvalidRequest, "body.image: is required");
  }
  ImageRecord record;
  record.id = id;
  record.owner = req.owner;
  record.name = req.name;
  record.state = ImageState::kQueued;
  record.source = req.source;
  if (req.source == ImageSource::kImage) record.ref = req.image_ref->String();
  record.steps_total = steps_total;
  record.start = req.start;
  record.sudo = req.sudo;
  record.build = req.build;
  record.labels = req.labels;
  // Tags move to a version when it is ready, so "name" keeps naming the
  // last good build while the next one runs.
  record.pending_tags = req.tags;
  record.step_names = req.step_names;
  record.shape = req.shape;
  record.created_ms = NowMs();
  record = catalog_.Insert(record, {}).get<ImageRecord>();
  auto job = std::make_shared<Job>();
  job->request = std::move(req);
  job->image_id = record.id;
  {
    std::lock_guard lock(mu_);
    jobs_[job->image_id] = job;
  }
  LogOf(job->image_id)
      ->Line("system", std::nullopt,
             "queued " + record.name + "@" + std::to_string(record.version));
  {
    std::lock_guard lock(mu_);
    queue_.push_back(job);
  }
  cv_.notify_one();
  LogInfo("image queued", {{"event", "image.queued"},
                           {"imageId", job->image_id},
                           {"name", record.name},
                           {"version", record.version},
                           {"source", SourceName(record.source)}});
  return record;
}

void ImageManager::Worker(std::stop_token stop) {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, stop, [&] { return !queue_.empty(); });
      if (stop.stop_requested()) return;
      // The oldest build of the key running the fewest, and of those the
      // key served longest ago: keys take turns, so one that queued many
      // does not hold up another's one.
      auto turn = [&](const std::shared_ptr<Job>& j) {
        const std::string& key = j->request.owner;
        auto running = building_.find(key);
        auto served = last_served_.find(key);
        return std::pair(running == building_.end() ? 0 : running->second,
                         served == last_served_.end() ? -1 : served->second);
      };
      auto next = std::min_element(queue_.begin(), queue_.end(),
                                   [&](const auto& a, const auto& b) { return turn(a) < turn(b); });
      job = *next;
      queue_.erase(next);
      ++building_[job->request.owner];
      last_served_[job->request.owner] = ++served_;
    }
    RunJob(job);
    bool idle;
    {
      std::lock_guard lock(mu_);
      if (--building_[job->request.owner] <= 0) building_.erase(job->request.owner);
      jobs_.erase(job->image_id);
      if (auto it = logs_.find(job->image_id); it != logs_.end()) {
        it->second->Close();  // RunJob has; a log kept must say the build ended
        KeepEndedLocked(job->image_id, std::move(it->second));
        logs_.erase(it);
      }
      idle = jobs_.empty();
      if (idle) pinned_layers_.clear();
    }
    if (idle) CollectGarbage(false, false);
  }
}

void ImageManager::RunJob(const std::shared_ptr<Job>& job) {
  std::optional<ImageRecord> found = Load(job->image_id);
  if (!found) return;
  ImageRecord& record = *found;
  auto log = LogOf(job->image_id);
  if (job->cancelled) {
    (void)Fail(*job, record,
               Status(Code::kInvalidRequest, "deleted before its build started",
                      json{{"code", "build_cancelled"}}));
    return;
  }
  record.state = ImageState::kBuilding;
  record.started_ms = NowMs();
  Save(record);
  int64_t t0 = MonotonicNowMs();
  Status result = Build(*job, record);
  if (result.ok()) result = Warm(*job, record);
  double seconds = static_cast<double>(MonotonicNowMs() - t0) / 1000.0;
  if (!result.ok()) {
    metrics::Observe("kiln_image_build_seconds", {{"result", "failed"}}, seconds);
    (void)Fail(*job, record, result);
    return;
  }
  metrics::Observe("kiln_image_build_seconds", {{"result", "ready"}}, seconds);
  record.state = ImageState::kReady;
  record.ready_ms = NowMs();
  record.ended_ms = record.ready_ms;
  for (const auto& tag : record.pending_tags)
    catalog_.Tag(record.owner, record.name, tag, record.id);
  record.pending_tags.clear();
  Save(record);
  log->Line("system", std::nullopt,
            "ready: " + record.name + "@" + std::to_string(record.version) + " (" +
                std::to_string(record.steps_cached) + "/" + std::to_string(record.steps_total) +
                " steps cached) in " + std::to_string(MonotonicNowMs() - t0) + " ms");
  log->Close();
  LogInfo(
      "image ready",
      {{"event", "image.ready"}, {"imageId", job->image_id}, {"buildMs", MonotonicNowMs() - t0}});
}

Status ImageManager::Build(Job& job, ImageRecord& record) {
  Builder builder(*this, job.request, job.image_id, LogOf(job.image_id), job.cancelled);
  Result<BuiltImage> built = builder.Run();
  if (!built.ok()) return built.status();
  Result<std::string> root = storage_.EnsureRoot(built->layers);
  if (!root.ok()) return root.status();
  Result<RunAs> run_as = Builder::RunAsOf(*root, built->config);
  if (!run_as.ok()) return run_as.status();
  uint64_t bytes = 0;
  for (const auto& l : built->layers)
    if (auto info = storage_.Layer(l)) bytes += info->bytes;
  std::string chain = ImageStorage::ChainId(built->layers).hex();
  record.layers = built->layers;
  record.chain_id = chain;
  record.config = built->config;
  record.run_as = *run_as;
  record.size_bytes = bytes;
  record.steps_total = built->steps_total;
  record.steps_cached = built->steps_cached;
  record.steps_run = built->steps_run;
  // The digest of a build is of its chain and its config as the API shows it.
  record.digest = built->manifest_digest && job.request.source == ImageSource::kImage
                      ? *built->manifest_digest
                      : "sha256:" + Sha256Hex(chain + ConfigJson(built->config).dump());
  // Without `start`, the CMD/ENTRYPOINT that the Dockerfile itself set is
  // the start command (an inherited one is often a shell or a REPL: not).
  if (!record.start && built->cmd_set_here &&
      (!built->config.cmd.empty() || !built->config.entrypoint.empty())) {
    std::vector<std::string> argv = built->config.entrypoint;
    argv.insert(argv.end(), built->config.cmd.begin(), built->config.cmd.end());
    StartSpec s;
    s.argv = argv;
    record.start = s;
    job.request.start = s;
  }
  Save(record);
  return Status::Ok();
}

Status ImageManager::Fail(Job& job, ImageRecord& record, const Status& why) {
  json details = why.details().is_object() ? why.details() : json::object();
  json error = details;
  error["code"] = details.value("code", std::string(CodeName(why.code())));
  error["message"] = why.message();
  std::optional<ImageRecord> now = Load(job.image_id);
  bool deleted = now && now->state == ImageState::kDeleting;
  if (closing_ && !deleted) {
    error["code"] = "build_interrupted";
    error["message"] = "kilnd stopped during the build; build it again";
  }
  if (!error.contains("logTail")) error["logTail"] = LogOf(job.image_id)->Tail(20);
  record.state = deleted ? ImageState::kDeleted : ImageState::kFailed;
  if (deleted) {
    for (const auto& tag : now->tags) catalog_.Untag(record.owner, record.name, tag);
  }
  record.error = error;
  record.ended_ms = NowMs();
  record.pending_tags.clear();
  Save(record);
  auto log = LogOf(job.image_id);
  log->Line("system", std::nullopt, "failed: " + why.message());
  log->Close();
  LogWarn("image build failed",
          {{"event", "image.failed"}, {"imageId", job.image_id}, {"error", error}});
  return why;
}

void ImageManager::Pin(const LayerId& layer) {
  std::lock_guard lock(mu_);
  pinned_layers_.insert(layer.str());
}

Status ImageManager::CheckQuota() {
  if (options_.storage_limit_mib == 0) return Status::Ok();
  uint64_t limit = options_.storage_limit_mib << 20;
  if (storage_.LayerBytes() <= limit) return Status::Ok();
  CollectGarbage(true, false);
  uint64_t used = storage_.LayerBytes();
  if (used <= limit) return Status::Ok();
  return Status(Code::kQuotaExceeded,
                "image storage holds " + std::to_string(used >> 20) +
                    " MiB, over --image-storage-mib " + std::to_string(options_.storage_limit_mib) +
                    ": delete images (and prune) first",
                json{{"code", "storage_quota_exceeded"}});
}

json ImageManager::CollectGarbage(bool cache, bool contexts) {
  int cache_removed = cache ? catalog_.ClearCache() : 0;
  std::set<std::string> used_images;
  for (const auto& s : sandboxes_.List(control::ListFilter{}))
    if (s->spec().image) used_images.insert(*s->spec().image);
  std::set<std::string> used_roots;
  for (const auto& s : sandboxes_.List(control::ListFilter{}))
    if (!s->spec().rootfs.empty()) used_roots.insert(fs::path(s->spec().rootfs).filename());
  for (const auto& snap : sandboxes_.snapshots().List()) {
    if (snap.image) used_images.insert(*snap.image);
    if (!snap.rootfs.empty()) used_roots.insert(fs::path(snap.rootfs).filename());
  }
  std::set<std::string> keep_layers, keep_roots = used_roots;
  for (const auto& snap : sandboxes_.snapshots().List())  // an imported root's layers
    keep_layers.insert(snap.layers.begin(), snap.layers.end());
  for (const ImageRecord& rec : LoadAll(std::nullopt, std::nullopt, std::nullopt)) {
    bool live = rec.state != ImageState::kDeleted || used_images.count(rec.id);
    if (!live) continue;
    for (const auto& l : rec.layers) keep_layers.insert(l.str());
    if (!rec.chain_id.empty()) keep_roots.insert(rec.chain_id);
  }
  for (const auto& l : catalog_.CachedLayers()) keep_layers.insert(l);
  bool building;
  {
    std::lock_guard lock(mu_);
    keep_layers.insert(pinned_layers_.begin(), pinned_layers_.end());
    building = !jobs_.empty();
  }
  // A snapshot import's layers and root belong to no record until it lists
  // the snapshot: while one runs, nothing of either kind is collected.
  bool importing = imports_.load() > 0;
  if (building || importing) {  // their intermediate roots are in use
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(storage_.dir() + "/roots", ec))
      keep_roots.insert(e.path().filename());
  }
  if (importing) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(storage_.dir() + "/layers", ec))
      keep_layers.insert(e.path().filename());
  }
  PruneStats stats = storage_.Prune(keep_layers, keep_roots, contexts);
  return json{{"layersRemoved", stats.layers_removed},
              {"rootsRemoved", stats.roots_removed},
              {"contextsRemoved", stats.contexts_removed},
              {"cacheEntriesRemoved", cache_removed},
              {"bytesFreed", stats.bytes_freed}};
}

json ImageManager::Prune() {
  json out = CollectGarbage(true, true);
  LogInfo("images pruned", {{"event", "image.prune"}, {"result", out}});
  return out;
}

}  // namespace kiln::images
