#include "images/manager/builder.h"

#include <fcntl.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/unique_fd.h"
#include "images/context/build_context.h"
#include "images/context/copy_step.h"
#include "images/context/dockerignore.h"
#include "images/context/image_users.h"
#include "images/context/safe_path.h"
#include "images/layers/flatten.h"
#include "images/parse/recipe.h"

namespace kiln::images {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Paths a step's sandbox has that are kiln's, not the image's: the agent and
// its sudo shim are mounted at start, the agent's socket lives in /run/kiln,
// and /dev, /proc and /sys are the sandbox's own.
const std::vector<std::string> kNotTheImages = {"opt/kiln", "run/kiln", "usr/bin/sudo",
                                                "dev",      "proc",     "sys"};

// True if every component of `path` is a real directory in `layer_dir`: an
// upper layer's directory is in the image's root whatever the layers below
// have, so a WORKDIR there needs no flattened root. Never follows a symlink.
bool DirInLayer(const std::string& layer_dir, const std::string& path) {
  UniqueFd dir(::open(layer_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) return false;
  for (const std::string& part : PathParts(path)) {
    if (part.starts_with(".wh.")) return false;  // a whiteout marker, not a name
    UniqueFd next(
        ::openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid()) return false;
    dir = std::move(next);
  }
  return true;
}

std::string EnvValue(const std::vector<std::string>& env, const std::string& key) {
  for (const auto& kv : env)
    if (kv.compare(0, key.size() + 1, key + "=") == 0) return kv.substr(key.size() + 1);
  return "";
}

void SetEnv(std::vector<std::string>& env, const std::string& key, const std::string& value) {
  std::erase_if(
      env, [&](const std::string& kv) { return kv.compare(0, key.size() + 1, key + "=") == 0; });
  env.push_back(key + "=" + value);
}

}  // namespace

// A FROM that names its registry ("localhost:5000/app", "docker.io/python"):
// anything else is a kiln image, and an unknown one is image_not_found
// rather than a surprise trip to a registry.
bool IsRegistryRef(const std::string& text) {
  size_t slash = text.find('/');
  if (slash == std::string::npos) return false;
  std::string first = text.substr(0, slash);
  return first.find('.') != std::string::npos || first.find(':') != std::string::npos ||
         first == "localhost";
}

namespace {

Status StepFailure(std::string code, std::string message, json details) {
  details["code"] = std::move(code);
  return Status(Code::kInvalidRequest, std::move(message), std::move(details));
}

}  // namespace

Result<RunAs> Builder::RunAsOf(const std::string& root, const OciConfig& config) {
  Result<ImageUser> user = ResolveImageUser(root, config.user);
  if (!user.ok()) return user.status();
  RunAs r;
  r.uid = user->uid;
  r.gid = user->gid;
  r.user = user->name;
  r.home = user->home.empty() ? "/" : user->home;
  r.workdir = config.working_dir.empty() ? "/" : config.working_dir;
  r.env = config.env;
  if (EnvValue(r.env, "PATH").empty())
    SetEnv(r.env, "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  return r;
}

Builder::Builder(BuildHost& host, const ImageRequest& request, std::string image_id,
                 std::shared_ptr<BuildLog> log, const std::atomic<bool>& cancelled)
    : host_(host),
      req_(request),
      image_id_(std::move(image_id)),
      log_(std::move(log)),
      cancelled_(cancelled),
      deadline_(std::chrono::steady_clock::now() +
                std::chrono::seconds(request.build.timeout_seconds)),
      cache_(host, request.owner, request.cache) {}

Status Builder::CheckTime() const {
  if (cancelled_)
    return StepFailure("build_cancelled", "the image was deleted during its build", json::object());
  if (std::chrono::steady_clock::now() >= deadline_)
    return StepFailure("build_timeout",
                       "the build ran past build.timeoutSeconds (" +
                           std::to_string(req_.build.timeout_seconds) + ")",
                       json::object());
  return Status::Ok();
}

Status Builder::CheckSize(const BuiltImage& st) const {
  uint64_t bytes = 0;
  for (const auto& l : st.layers)
    if (auto info = host_.Layers().Layer(l)) bytes += info->bytes;
  uint64_t max = static_cast<uint64_t>(req_.build.max_image_mib) << 20;
  if (bytes > max)
    return StepFailure("image_too_large",
                       "the image is " + std::to_string(bytes >> 20) +
                           " MiB, over build.maxImageMiB (" +
                           std::to_string(req_.build.max_image_mib) + ")",
                       json::object());
  return host_.CheckStoreQuota();
}

bool Builder::TakeCached(BuiltImage& st, const std::string& key) {
  // A step at or past rebuild_from_step runs again (its new layer is cached
  // as any other's); those before it may be taken from the cache.
  if (req_.rebuild_from_step && step_ && *step_ >= *req_.rebuild_from_step) return false;
  std::optional<LayerId> hit = cache_.Find(key);
  if (!hit) return false;
  Say("cached");
  ++steps_cached_;
  host_.PinLayer(*hit);
  st.layers.push_back(*hit);
  return true;
}

Result<BuiltImage> Builder::Run() {
  tmp_dir_ = host_.Layers().TempPath("build-" + image_id_);
  fs::create_directories(tmp_dir_);
  struct Cleanup {
    std::string dir;
    ~Cleanup() { (void)RemoveTree(dir); }
  } cleanup{tmp_dir_};
  puller_.emplace(PullContext{
      host_, req_.owner, tmp_dir_, static_cast<uint64_t>(req_.build.max_image_mib) << 20, deadline_,
      cancelled_, [this] { return CheckTime(); }, [this](const std::string& line) { Say(line); }});

  Result<BuiltImage> built = Status(Code::kInternal, "no source");
  if (req_.source == ImageSource::kImage) {
    const std::optional<ImageRef>& ref = req_.image_ref;
    if (!ref) return Status(Code::kInvalidRequest, "body.image: is required");
    step_ = 1;
    steps_total_ = 1;
    Say("pulling " + ref->String());
    built = Pull(*ref);
  } else if (req_.source == ImageSource::kRecipe) {
    Result<RecipeBuild> recipe = RecipeToBuild(req_.recipe);
    if (!recipe.ok()) return recipe.status();
    std::string ctx = tmp_dir_ + "/context";
    for (const auto& f : recipe->context) {
      fs::path p = fs::path(ctx) / f.context_path;
      fs::create_directories(p.parent_path());
      std::ofstream(p, std::ios::binary) << f.bytes;
      fs::permissions(p, static_cast<fs::perms>(f.mode & 07777));
    }
    fs::create_directories(ctx);
    built = RunDockerfile(recipe->dockerfile, ctx);
    if (built.ok()) {
      // A recipe installs as root; its image runs as its base's user again.
      Result<ImageRecord> base = host_.FindImage(req_.recipe.value("base", "base"), req_.owner);
      if (base.ok()) built->config.user = base->config ? base->config->user : "";
    }
  } else {
    std::string ctx = tmp_dir_ + "/context";
    if (req_.context) {
      std::optional<DockerIgnore> ignore;
      if (req_.dockerignore) {
        Result<DockerIgnore> parsed = DockerIgnore::Parse(*req_.dockerignore);
        if (!parsed.ok()) return parsed.status();
        ignore = std::move(*parsed);
      }
      Result<ContextStats> unpacked =
          UnpackContext(host_.ContextPath(req_.owner, *req_.context), ctx, ContextLimits{},
                        ignore ? &*ignore : nullptr);
      if (!unpacked.ok()) return unpacked.status();
      Say("context: " + std::to_string(unpacked->files) + " files, " +
          std::to_string(unpacked->bytes) + " bytes");
    } else {
      fs::create_directories(ctx);
      // Inline files make the whole context: a fresh folder, paths checked
      // to be names under it (InlineContextFiles), so nothing lands outside.
      for (const auto& f : req_.files) {
        fs::path p = fs::path(ctx) / f.context_path;
        fs::create_directories(p.parent_path());
        std::ofstream(p, std::ios::binary) << f.bytes;
        fs::permissions(p, static_cast<fs::perms>(f.mode & 0777));
      }
      if (!req_.files.empty())
        Say("context: " + std::to_string(req_.files.size()) + " inline files");
    }
    if (Status named = UnpackNamedContexts(); !named.ok()) return named;
    built = RunDockerfile(req_.dockerfile, ctx);
  }
  if (!built.ok()) return built;
  for (const auto& [k, v] : req_.env) SetEnv(built->config.env, k, v);
  for (const auto& [k, v] : req_.labels) built->config.labels[k] = v;
  built->steps_total = steps_total_;
  built->steps_cached = steps_cached_;
  built->steps_run = steps_run_;
  return built;
}

Status Builder::UnpackNamedContexts() {
  for (const auto& [name, digest] : req_.named_contexts) {
    // Names were checked at submit (ValidateContextName): a folder name.
    std::string dir = tmp_dir_ + "/named/" + name;
    fs::create_directories(tmp_dir_ + "/named");
    Result<ContextStats> unpacked =
        UnpackContext(host_.ContextPath(req_.owner, digest), dir, ContextLimits{}, nullptr);
    if (!unpacked.ok()) {
      json d =
          unpacked.status().details().is_object() ? unpacked.status().details() : json::object();
      d["context"] = name;
      return Status(unpacked.status().code(),
                    "context " + name + ": " + unpacked.status().message(), d);
    }
    named_dirs_[name] = dir;
    Say("context " + name + ": " + std::to_string(unpacked->files) + " files, " +
        std::to_string(unpacked->bytes) + " bytes");
  }
  return Status::Ok();
}

Result<BuiltImage> Builder::RunDockerfile(const std::string& text, const std::string& context_dir) {
  // `ENV PATH=/x:$PATH` on a kiln image sees that image's PATH, as Docker's
  // does (a registry base is known only once pulled: its ENV is not seen).
  BaseScope base_scope = [this](const std::string& base) -> std::optional<BaseConfig> {
    if (IsRegistryRef(base)) return std::nullopt;
    Result<ImageRecord> image = host_.FindImage(base, req_.owner);
    if (!image.ok() || image->state != ImageState::kReady) return std::nullopt;
    OciConfig config = image->config.value_or(OciConfig{});
    return BaseConfig{config.env, config.working_dir};
  };
  Result<Dockerfile> parsed = ParseDockerfile(text, req_.build_args, {}, base_scope);
  if (!parsed.ok()) return parsed.status();
  Result<std::vector<int>> order = StagesFor(*parsed, req_.target);
  if (!order.ok()) return order.status();
  for (int s : *order) steps_total_ += 1 + static_cast<int>(parsed->stages[s].steps.size());
  std::vector<BuiltImage> done;
  std::map<int, int> slot;  // stage index -> position in done
  int n = 0;
  for (int s : *order) {
    const Stage& stage = parsed->stages[s];
    step_ = ++n;
    Say("[" + std::to_string(n) + "/" + std::to_string(steps_total_) + "] FROM " + stage.base +
        (stage.name ? " AS " + *stage.name : ""));
    Result<BuiltImage> base = BaseOf(stage, done, slot);
    if (!base.ok()) {
      json d = base.status().details().is_object() ? base.status().details() : json::object();
      d["step"] = n;
      d["line"] = stage.line;
      d["instruction"] = "FROM " + stage.base;
      return Status(base.status().code(), base.status().message(), d);
    }
    BuiltImage st = std::move(*base);
    st.cmd_set_here = false;
    for (const Step& step : stage.steps) {
      step_ = ++n;
      Say("[" + std::to_string(n) + "/" + std::to_string(steps_total_) + "] " + step.text);
      if (Status t = CheckTime(); !t.ok()) return t;
      Status result = std::visit(
          [&](const auto& in) -> Status {
            using T = std::decay_t<decltype(in)>;
            if constexpr (std::is_same_v<T, RunInstr>) {
              return RunStep(st, in, step);
            } else if constexpr (std::is_same_v<T, CopyInstr>) {
              return CopyStep(st, in, step, context_dir, done, slot);
            } else if constexpr (std::is_same_v<T, EnvInstr>) {
              for (const auto& [k, v] : in.vars) SetEnv(st.config.env, k, v);
            } else if constexpr (std::is_same_v<T, WorkdirInstr>) {
              st.config.working_dir = in.path;
              return WorkdirStep(st, step);
            } else if constexpr (std::is_same_v<T, UserInstr>) {
              st.config.user = in.user;
            } else if constexpr (std::is_same_v<T, LabelInstr>) {
              for (const auto& [k, v] : in.labels) st.config.labels[k] = v;
            } else if constexpr (std::is_same_v<T, CmdInstr>) {
              st.cmd_set_here = true;
              st.config.cmd = in.command.argv;  // a shell form comes with its SHELL
            } else if constexpr (std::is_same_v<T, EntrypointInstr>) {
              st.cmd_set_here = true;
              st.config.entrypoint = in.command.argv;
              st.config.cmd.clear();  // as Docker: an ENTRYPOINT resets CMD
            } else if constexpr (std::is_same_v<T, ExposeInstr>) {
              for (const auto& p : in.ports)
                if (std::find(st.config.exposed_ports.begin(), st.config.exposed_ports.end(), p) ==
                    st.config.exposed_ports.end())
                  st.config.exposed_ports.push_back(p);
              std::sort(st.config.exposed_ports.begin(), st.config.exposed_ports.end());
            } else if constexpr (std::is_same_v<T, StopSignalInstr>) {
              st.config.stop_signal = in.signal;
            }
            return Status::Ok();
          },
          step.instruction);
      if (!result.ok()) {
        json d = result.details().is_object() ? result.details() : json::object();
        d["step"] = n;
        d["line"] = step.line;
        d["instruction"] = step.text;
        return Status(result.code(), result.message(), d);
      }
      if (Status size = CheckSize(st); !size.ok()) return size;
    }
    slot[s] = static_cast<int>(done.size());
    done.push_back(std::move(st));
  }
  return done.back();
}

Result<BuiltImage> Builder::BaseOf(const Stage& stage, const std::vector<BuiltImage>& done,
                                   const std::map<int, int>& slot) {
  if (stage.base_stage) return done.at(slot.at(*stage.base_stage));
  if (stage.base == "scratch") return BuiltImage{};
  // A kiln image first (the key's own or the built-in), then a registry.
  Result<ImageRecord> image = host_.FindImage(stage.base, req_.owner);
  if (image.ok()) {
    if (image->state != ImageState::kReady)
      return Status(Code::kBuildInProgress, "image " + stage.base + " is not ready");
    BuiltImage b;
    b.layers = image->layers;
    b.config = image->config.value_or(OciConfig{});
    ++steps_cached_;
    return b;
  }
  Result<ImageRef> ref = ParseImageRef(stage.base);
  if (!ref.ok() || !IsRegistryRef(stage.base)) return image.status();
  return Pull(*ref);
}

Result<BuiltImage> Builder::Pull(const ImageRef& ref) {
  Result<PulledImage> pulled = puller_->Pull(ref);
  if (!pulled.ok()) return pulled.status();
  steps_run_ += pulled->layers_unpacked;
  BuiltImage b;
  b.layers = std::move(pulled->layers);
  b.config = std::move(pulled->config);
  b.manifest_digest = std::move(pulled->manifest_digest);
  return b;
}

Status Builder::RunStep(BuiltImage& st, const RunInstr& run, const Step& step) {
  const std::vector<std::string>& argv = run.command.argv;  // a shell form comes with its SHELL
  std::string key =
      RunStepKey(ImageStorage::ChainId(st.layers).hex(), run, st.config, req_.network);
  if (TakeCached(st, key)) return Status::Ok();
  Result<std::string> root = host_.Layers().EnsureRoot(st.layers);
  if (!root.ok()) return root.status();
  Result<RunAs> run_as = RunAsOf(*root, st.config);
  if (!run_as.ok()) return run_as.status();

  std::string tar = tmp_dir_ + "/upper-" + std::to_string(*step_) + ".tar";
  SandboxStep sandbox_step;
  sandbox_step.owner = req_.owner;
  sandbox_step.image_id = image_id_;
  sandbox_step.shape = Shape{req_.build.vcpu, req_.build.memory_mib, req_.build.disk_mib};
  // The build's own deadline ends the step; the sandbox's lease runs a
  // minute past it, so that the step's end is reported as the build's
  // timeout, not as a sandbox that went away.
  sandbox_step.timeout_seconds = req_.build.timeout_seconds + 60;
  sandbox_step.network = req_.network;
  sandbox_step.root = *root;
  sandbox_step.run_as = *run_as;
  sandbox_step.argv = argv;
  sandbox_step.env = run.build_args;
  sandbox_step.cwd = run_as->workdir;
  sandbox_step.deadline = deadline_;
  sandbox_step.output = [this](int stream, std::string_view data) {
    log_->Write(stream == 2 ? "stderr" : "stdout", step_, std::string(data));
  };
  sandbox_step.cancelled = [this] { return cancelled_.load(); };
  sandbox_step.upper_tar = tar;
  Result<SandboxStepExit> exit = host_.RunInSandbox(sandbox_step);
  if (!exit.ok()) {
    if (Status t = CheckTime(); !t.ok()) return t;
    return exit.status();
  }
  if (Status t = CheckTime(); !t.ok()) return t;
  if (exit->start_error) {
    return StepFailure("step_failed", "RUN could not start: " + *exit->start_error,
                       json{{"exitCode", 127}, {"logTail", log_->Tail(20)}});
  }
  if (!exit->exit_code || *exit->exit_code != 0) {
    int code = exit->exit_code.value_or(128);
    std::string what = exit->exit_code ? "exit code " + std::to_string(code)
                                       : "signal " + exit->signal.value_or("?");
    return StepFailure("step_failed",
                       "step " + std::to_string(*step_) + " (line " + std::to_string(step.line) +
                           ") failed with " + what,
                       json{{"exitCode", code}, {"logTail", log_->Tail(20)}});
  }
  UnpackOptions opts;
  opts.skip_prefixes = kNotTheImages;
  opts.max_bytes = static_cast<uint64_t>(req_.build.max_image_mib) << 20;
  Result<LayerInfo> layer = host_.Layers().AddLayerTar(tar, opts);
  fs::remove(tar);
  if (!layer.ok()) return layer.status();
  host_.PinLayer(layer->id);
  cache_.Store(key, layer->id);
  ++steps_run_;
  st.layers.push_back(layer->id);
  return Status::Ok();
}

Status Builder::CopyStep(BuiltImage& st, const CopyInstr& copy, const Step& step,
                         const std::string& context_dir, const std::vector<BuiltImage>& done,
                         const std::map<int, int>& slot) {
  (void)step;
  CopySpec spec;
  spec.source_root = context_dir;
  std::optional<DockerIgnore> ignore;
  auto named = copy.from && !copy.from_stage ? named_dirs_.find(*copy.from) : named_dirs_.end();
  if (named != named_dirs_.end()) {
    // A named context is a context of its own: read as uploaded, whole.
    spec.source_root = named->second;
  } else if (copy.from) {
    std::optional<int> stage = copy.from_stage;
    BuiltImage from;
    if (stage) {
      if (!slot.count(*stage))
        return Status(Code::kInvalidRequest, "stage " + *copy.from + " is not built");
      from = done.at(slot.at(*stage));
    } else {
      Stage fake;
      fake.base = *copy.from;
      Result<BuiltImage> other = BaseOf(fake, done, slot);
      if (!other.ok()) return other.status();
      from = std::move(*other);
    }
    Result<std::string> root = host_.Layers().EnsureRoot(from.layers);
    if (!root.ok()) return root.status();
    spec.source_root = *root;
  } else if (req_.dockerignore) {
    Result<DockerIgnore> parsed = DockerIgnore::Parse(*req_.dockerignore);
    if (!parsed.ok()) return parsed.status();
    ignore = std::move(*parsed);
    spec.ignore = &*ignore;
  }
  spec.sources = copy.sources;
  std::string dest = copy.dest;
  if (!dest.starts_with("/")) {
    std::string wd = st.config.working_dir.empty() ? "/" : st.config.working_dir;
    bool dir = dest.ends_with("/") || dest == ".";
    dest = CleanPath(wd + "/" + dest);
    if (dir && !dest.ends_with("/")) dest += "/";
  }
  spec.dest = dest;
  spec.chmod = copy.chmod;
  spec.add = copy.add;
  spec.max_unpacked_bytes = static_cast<uint64_t>(req_.build.max_image_mib) << 20;
  Result<std::string> digest = CopySourcesDigest(spec);
  if (!digest.ok()) return digest.status();
  std::string key = CopyStepKey(ImageStorage::ChainId(st.layers).hex(), copy, spec.dest, *digest);
  // The key names --chown as written, so a cached step needs no root: a
  // flatten is seconds, and a minute on a busy disk.
  if (TakeCached(st, key)) return Status::Ok();
  Result<std::string> parent_root = host_.Layers().EnsureRoot(st.layers);
  if (!parent_root.ok()) return parent_root.status();
  if (copy.chown) {
    Result<ImageUser> u = ResolveImageUser(*parent_root, *copy.chown);
    if (!u.ok()) return u.status();
    spec.chown = std::make_pair(u->uid, u->gid);
  }
  std::string layer_dir = tmp_dir_ + "/copy-" + std::to_string(*step_);
  Result<CopyStats> copied = ApplyCopy(spec, *parent_root, layer_dir);
  if (!copied.ok()) {
    (void)RemoveTree(layer_dir);
    return copied.status();
  }
  Result<LayerInfo> layer = host_.Layers().AddLayerDir(layer_dir, *LayerId::Parse(key));
  if (!layer.ok()) return layer.status();
  host_.PinLayer(layer->id);
  cache_.Store(key, layer->id);
  ++steps_run_;
  st.layers.push_back(layer->id);
  return Status::Ok();
}

Status Builder::WorkdirStep(BuiltImage& st, const Step& step) {
  (void)step;
  // Docker creates a WORKDIR that does not exist: a layer of one directory.
  // That layer, made before on this same chain, says it is missing again.
  LayerId key = WorkdirLayerId(ImageStorage::ChainId(st.layers).hex(), st.config.working_dir);
  if (host_.Layers().Layer(key)) {
    st.layers.push_back(key);
    host_.PinLayer(key);
    return Status::Ok();
  }
  if (!st.layers.empty() &&
      DirInLayer(host_.Layers().LayerDir(st.layers.back()), st.config.working_dir))
    return Status::Ok();
  Result<std::string> root = host_.Layers().EnsureRoot(st.layers);
  if (!root.ok()) return root.status();
  if (OpenInRoot(*root, st.config.working_dir, O_RDONLY | O_DIRECTORY).ok()) return Status::Ok();
  std::string dir = tmp_dir_ + "/workdir-" + std::to_string(*step_);
  std::error_code ec;
  fs::create_directories(dir + CleanPath(st.config.working_dir), ec);
  if (ec) return Status(Code::kIoError, "cannot create WORKDIR: " + ec.message());
  Result<LayerInfo> layer = host_.Layers().AddLayerDir(dir, key);
  if (!layer.ok()) return layer.status();
  host_.PinLayer(key);
  st.layers.push_back(key);
  return Status::Ok();
}

}  // namespace kiln::images
