// SandboxFusion's routes under /sandboxfusion/{key}/ (see sandboxfusion.h):
// run_code runs one program in a fresh sandbox of the language image --
// launch (launch::Launcher), write its files, compile, run, fetch files
// (io::SandboxIo), delete -- and answers in SandboxFusion's shape.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "api/auth.h"
#include "api/errors.h"
#include "api/front.h"
#include "api/sandboxfusion/sandboxfusion.h"
#include "common/base64.h"
#include "common/contract.h"
#include "common/time.h"
#include "control/fair_slots.h"
#include "images/manager/image_manager.h"
#include "interpreter/interpreter.h"

namespace kiln::api::sandboxfusion {

using nlohmann::json;

namespace {

// How long a launch waits for room before answering 504: verl gives a
// request compile_timeout + run_timeout + 10 s in all, and retries a 504.
constexpr std::chrono::seconds kSfRoomWait{5};
// Seconds of lease past the two steps (launch, files, fetch, delete).
constexpr int kSfLeaseSlack = 120;

// What the front's routes share: the pools it sized, and its program slots
// (control/fair_slots.h: a share per key, a line per key).
struct FrontState {
  explicit FrontState(control::FairSlots::Options slots_options) : slots(slots_options) {}
  std::mutex mu;
  std::set<std::string> images;  // pools sized
  control::FairSlots slots;
};

// The caller's slot, taken before its body is read: a waiting request holds
// its connection and what the server read of its body ahead (64 KiB at
// most), never the body. Throws past the key's line or when the client left.
std::shared_ptr<void> TakeSlot(FrontState& pools, Exchange& ex) {
  std::shared_ptr<void> slot;
  const std::string& key = CallerOf(ex).key_id;
  switch (pools.slots.Take(
      key, [&ex] { return ex.ClientGone(); }, &slot)) {
    case control::FairSlots::Result::kGranted:
      return slot;
    case control::FairSlots::Result::kQueueFull:
      throw ApiError(Status(Code::kRateLimited,
                            "key " + key + " has " +
                                std::to_string(pools.slots.options().queue_per_key) +
                                " programs waiting for a slot already (--sandboxfusion-queue): "
                                "retry once some have answered")
                         .WithRetryAfter(1));
    case control::FairSlots::Result::kGaveUp:
      break;
  }
  throw ApiError(Code::kNoCapacity, "the client left while its program waited");
}

std::string InWorkDir(const std::string& path) {
  return path.front() == '/' ? path : std::string(kWorkDir) + "/" + path;
}

int64_t StepMs(double seconds) { return static_cast<int64_t>(std::ceil(seconds * 1000.0)); }

// Writes `bytes` at `path` (its folders made); a failure's words, or "".
std::string WriteOne(const io::SandboxIo& sandbox, const std::string& path,
                     const std::string& bytes) {
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0 && path.substr(0, slash) != kWorkDir) {
    auto made = sandbox.Mkdir(path.substr(0, slash), true);
    if (!made.ok()) return made.status().message();
  }
  io::FileUpload file = sandbox.WriteFile(path, 0644);
  for (size_t at = 0; at < bytes.size(); at += 1 << 20) {
    if (Status s = file.Write(std::string_view(bytes).substr(at, 1 << 20)); !s.ok()) {
      file.Cancel();
      return s.message();
    }
  }
  auto done = file.Finish();
  return done.ok() ? "" : done.status().message();
}

// The file at `path`, if it is one and fits in `budget` bytes.
std::optional<std::string> ReadOne(const io::SandboxIo& sandbox, const std::string& path,
                                   uint64_t budget) {
  auto st = sandbox.Stat(path);
  if (!st.ok() || !st->exists || st->entry.type != io::FileType::kFile) return std::nullopt;
  if (st->entry.size > budget) return std::nullopt;
  auto file = sandbox.ReadFile(path);
  if (!file.ok()) return std::nullopt;
  std::string out, chunk;
  while (file->Next(&chunk, 30000)) {
    out += chunk;
    if (out.size() > budget) {
      file->Cancel();
      return std::nullopt;
    }
  }
  if (!file->status().ok()) return std::nullopt;
  return out;
}

// One step to its end; nullopt if the client left (nobody reads the answer).
std::optional<StepResult> RunStep(Exchange& ex, const io::SandboxIo& sandbox,
                                  const io::Command& command, double seconds,
                                  std::optional<std::string> stdin_data) {
  io::ExecOptions options;
  options.timeout_ms = StepMs(seconds);
  options.stdin_bytes = std::move(stdin_data);
  options.capture_cap = kOutputCap;
  options.kill_past_cap = true;
  auto run = sandbox.ExecToEnd(command, options, [&ex] { return ex.ClientGone(); });
  if (!run.ok()) {
    StepResult s;
    s.status = StepStatus::kError;
    s.stderr_data = "kiln could not run the step: " + run.status().message();
    return s;
  }
  if (run->end == io::ExecResult::End::kAbandoned) return std::nullopt;
  StepResult s = StepFromExec(*run);
  if (run->stdout_truncated || run->stderr_truncated)
    s.stderr_data += "\nkiln: the program's output passed 8 MiB on a stream; it was stopped there";
  return s;
}

// The launch request for one program of the caller's.
launch::LaunchRequest ProgramLaunch(ApiContext& ctx, Exchange& ex,
                                    const SandboxFusionOptions& options, double steps) {
  control::SandboxSpec spec;
  spec.timeout_seconds = std::clamp(static_cast<int>(std::ceil(steps)) + kSfLeaseSlack,
                                    static_cast<int>(contract::kTimeoutSeconds.min),
                                    static_cast<int>(ctx.sandboxes.lease_seconds().max));
  spec.delete_on_lease_end = true;  // a front that died mid-request leaves nothing
  spec.pausable = false;
  spec.auto_wake = false;
  spec.labels["kiln.front"] = "sandboxfusion";
  launch::LaunchRequest launch = LaunchFor(ex, std::move(spec), kSfRoomWait);
  LaunchFrontImage(ctx, ex, options.image, launch);
  return launch;
}

// Sizes the image's warm pool the first time this front launches it, as
// the operator (--sandboxfusion-pool), whoever owns the image.
void SizePool(ApiContext& ctx, const SandboxFusionOptions& options, FrontState& pools,
              const control::Sandbox& s) {
  if (options.pool_size <= 0 || !ctx.images || !s.spec().image) return;
  std::string image = *s.spec().image;
  {
    std::lock_guard lock(pools.mu);
    if (!pools.images.insert(image).second) return;
  }
  (void)ctx.images->Pool(image, std::nullopt, options.pool_size);
}

// A fresh sandbox of the language image for one request, deleted when
// `removal` goes (after the answer is written, or when the request failed).
struct Leased {
  std::shared_ptr<void> slot;  // released last, after the sandbox's removal
  std::shared_ptr<control::Sandbox> sandbox;
  std::shared_ptr<void> removal;
};

Leased LaunchOne(ApiContext& ctx, const SandboxFusionOptions& options, FrontState& pools,
                 Exchange& ex, std::shared_ptr<void> slot, double steps) {
  Leased out;
  out.slot = std::move(slot);
  auto launched = ctx.launcher.Launch(ProgramLaunch(ctx, ex, options, steps));
  if (!launched.ok() && launched.status().code() == Code::kImageNotFound)
    throw ApiError(Code::kImageNotFound,
                   "no language image '" + options.image +
                       "' for this key: build it under an admin key (then it serves every key) "
                       "or under this key with `make sandboxfusion-image` "
                       "(examples/images/sandboxfusion.py)");
  out.sandbox = ValueOrThrow(std::move(launched)).sandbox;
  out.removal = std::shared_ptr<void>(
      nullptr, [&ctx, id = out.sandbox->id(), owner = out.sandbox->spec().owner](void*) {
        ctx.sandboxes.Delete(id, owner);
      });
  SizePool(ctx, options, pools, *out.sandbox);
  return out;
}

// Writes the request's files; a failure's words, or "".
std::string WriteFiles(const io::SandboxIo& box,
                       const std::vector<std::pair<std::string, std::string>>& files) {
  for (const auto& [path, bytes] : files) {
    if (std::string err = WriteOne(box, InWorkDir(path), bytes); !err.empty())
      return "cannot write files." + path + ": " + err;
  }
  return "";
}

// fetch_files that exist as files, base64, within kFetchCap in all.
std::map<std::string, std::string> FetchFiles(const io::SandboxIo& box,
                                              const std::vector<std::string>& paths) {
  std::map<std::string, std::string> out;
  uint64_t budget = kFetchCap;
  for (const std::string& path : paths) {
    auto bytes = ReadOne(box, InWorkDir(path), budget);
    if (!bytes) continue;  // SandboxFusion answers only the files that exist
    budget -= bytes->size();
    out[path] = Base64Encode(*bytes);
  }
  return out;
}

void RunCode(ApiContext& ctx, const SandboxFusionOptions& options, FrontState& pools,
             Exchange& ex) {
  std::shared_ptr<void> slot = TakeSlot(pools, ex);
  ReadResult read = ReadRunCode(ex.JsonBody(24u << 20));
  if (!read.unknown_language.empty()) {
    std::string names;
    for (const Language& l : Languages()) names += (names.empty() ? "" : ", ") + l.name;
    return ex.SendJson(200, SandboxErrorJson("unknown language '" + read.unknown_language +
                                             "': SandboxFusion's languages are " + names));
  }
  const RunCodeRequest& req = read.request;
  if (!req.language->refused.empty())
    return ex.SendJson(200, SandboxErrorJson("kiln does not serve language '" + req.language->name +
                                             "': " + req.language->refused));
  Plan plan = PlanFor(req);

  Leased leased =
      LaunchOne(ctx, options, pools, ex, std::move(slot), req.compile_timeout + req.run_timeout);
  const std::shared_ptr<control::Sandbox>& sandbox = leased.sandbox;
  io::SandboxIo box = RunningIo(ctx, ex, *sandbox);

  RunCodeAnswer answer;
  auto sandbox_error = [&](const std::string& message) {
    answer.status = RunStatus::kSandboxError;
    answer.message = message;
    ex.SendJson(200, AnswerJson(answer));
  };
  // SandboxFusion writes the files, then the program (which wins a clash).
  if (std::string err = WriteFiles(box, req.files); !err.empty()) return sandbox_error(err);
  if (std::string err = WriteOne(box, InWorkDir(plan.file), plan.source); !err.empty())
    return sandbox_error("cannot write the program: " + err);

  std::string tool;
  auto missing = [&] {
    return sandbox_error("language '" + req.language->name + "' needs " + tool + ", which image '" +
                         options.image +
                         "' lacks: build the full language image (make sandboxfusion-image-full)");
  };
  if (plan.compile) {
    answer.compile_result = RunStep(ex, box, *plan.compile, req.compile_timeout, std::nullopt);
    if (!answer.compile_result) return;  // the client left
    if (MissingTool(*answer.compile_result, &tool)) return missing();
  }
  const auto& compiled = answer.compile_result;
  if (!compiled || (compiled->status == StepStatus::kFinished && compiled->return_code == 0)) {
    answer.run_result = RunStep(ex, box, plan.run, req.run_timeout, req.stdin_data);
    if (!answer.run_result) return;
    if (!plan.compile && MissingTool(*answer.run_result, &tool)) return missing();
  }
  answer.files = FetchFiles(box, req.fetch_files);
  answer.status = StatusOf(answer.compile_result, answer.run_result);
  if (answer.status == RunStatus::kSandboxError) {
    for (const auto* step : {&answer.compile_result, &answer.run_result})
      if (*step && (*step)->status == StepStatus::kError) answer.message = (*step)->stderr_data;
  }
  ex.SendJson(200, AnswerJson(answer));
}

// run_jupyter: the cells in order in one Python kernel of kiln's own
// interpreter, in a fresh sandbox of the language image. As SandboxFusion's:
// the driver (the whole run) TimeLimitExceeded past total_timeout answers
// Failed without cells; else Success with every cell's output and error.
void RunJupyter(ApiContext& ctx, const SandboxFusionOptions& options, FrontState& pools,
                Exchange& ex) {
  std::shared_ptr<void> slot = TakeSlot(pools, ex);
  RunJupyterRequest req = ReadRunJupyter(ex.JsonBody(24u << 20));
  Leased leased = LaunchOne(ctx, options, pools, ex, std::move(slot), req.total_timeout);
  io::SandboxIo box = RunningIo(ctx, ex, *leased.sandbox);
  if (std::string err = WriteFiles(box, req.files); !err.empty())
    return ex.SendJson(
        200, JupyterJson(RunStatus::kSandboxError, err, std::nullopt, nlohmann::json::array(), {}));
  int64_t t0 = MonotonicNowMs();
  int64_t total_ms = StepMs(req.total_timeout);
  // SandboxFusion starts its kernel under RLIMIT_AS and RLIMIT_DATA of
  // memory_limit_MB; kiln's kernel is running already, so it lowers its own
  // soft limits first, in a cell of its own that leaves no name behind.
  if (req.memory_limit_mb > 0) {
    interpreter::RunRequest limit;
    limit.code = KernelMemoryLimitCell(req.memory_limit_mb);
    limit.language = interpreter::Language::kPython;
    limit.timeout_ms = total_ms;
    auto done = interpreter::SharedInterpreter().Run(
        box, leased.sandbox->id(), limit,
        [&ex](const nlohmann::json&) { return !ex.ClientGone(); });
    if (ex.ClientGone()) return;
    if (!done.ok() || done->status != "ok")
      return ex.SendJson(200, JupyterJson(RunStatus::kSandboxError,
                                          "the kernel could not take memory_limit_MB " +
                                              std::to_string(req.memory_limit_mb) + ": " +
                                              (done.ok() ? done->status : done.status().message()),
                                          std::nullopt, nlohmann::json::array(), {}));
  }
  StepResult driver;
  driver.return_code = 0;
  nlohmann::json cells = nlohmann::json::array();
  for (const std::string& cell : req.cells) {
    int64_t left = total_ms - (MonotonicNowMs() - t0);
    if (left <= 0) {
      driver.status = StepStatus::kTimeLimitExceeded;
      break;
    }
    interpreter::RunRequest run;
    run.code = cell;
    run.language = interpreter::Language::kPython;
    run.timeout_ms = req.cell_timeout > 0 ? std::min(left, StepMs(req.cell_timeout)) : left;
    auto done = interpreter::SharedInterpreter().Run(
        box, leased.sandbox->id(), run, [&ex](const nlohmann::json&) { return !ex.ClientGone(); });
    if (ex.ClientGone()) return;
    if (!done.ok()) {
      return ex.SendJson(200,
                         JupyterJson(RunStatus::kSandboxError,
                                     "the kernel could not run a cell: " + done.status().message(),
                                     std::nullopt, nlohmann::json::array(), {}));
    }
    if (done->status == "timeout") {
      driver.status = StepStatus::kTimeLimitExceeded;
      break;
    }
    if (done->status == "lost") {
      return ex.SendJson(
          200, JupyterJson(RunStatus::kSandboxError, "the kernel was lost while a cell ran",
                           std::nullopt, nlohmann::json::array(), {}));
    }
    cells.push_back(CellJson(*done));
  }
  driver.execution_time = static_cast<double>(MonotonicNowMs() - t0) / 1000.0;
  bool finished = driver.status == StepStatus::kFinished;
  if (!finished) driver.return_code.reset();
  ex.SendJson(200, JupyterJson(finished ? RunStatus::kSuccess : RunStatus::kFailed, "", driver,
                               finished ? cells : nlohmann::json::array(),
                               finished ? FetchFiles(box, req.fetch_files)
                                        : std::map<std::string, std::string>{}));
}

}  // namespace
}  // namespace kiln::api::sandboxfusion

namespace kiln::api {

void AddSandboxFusionRoutes(Router& r, ApiContext& ctx, SandboxFusionOptions options) {
  using sandboxfusion::FrontState;
  auto shared = std::make_shared<SandboxFusionOptions>(std::move(options));
  if (shared->concurrency <= 0)
    shared->concurrency = 2 * std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  int per_key = shared->key_concurrency > 0
                    ? std::min(shared->key_concurrency, shared->concurrency)
                    : std::max(1, shared->concurrency - shared->concurrency / 4);
  auto pools = std::make_shared<FrontState>(control::FairSlots::Options{
      .limit = shared->concurrency, .per_key = per_key, .queue_per_key = shared->queue});
  r.Add("POST", "/sandboxfusion/{key}/run_code",
        [&ctx, shared, pools](Exchange& ex) { sandboxfusion::RunCode(ctx, *shared, *pools, ex); });
  r.Add("GET", "/sandboxfusion/{key}/v1/ping",
        [](Exchange& ex) { ex.SendJson(200, nlohmann::json("pong")); });
  r.Add("POST", "/sandboxfusion/{key}/run_jupyter", [&ctx, shared, pools](Exchange& ex) {
    sandboxfusion::RunJupyter(ctx, *shared, *pools, ex);
  });
  // Anything else under the prefix, in SandboxFusion's shape (as every
  // error here: SandboxFusionDialect); the message names the route, never
  // the path (which holds the key).
  r.Add("*", "/sandboxfusion/{key}/{rest...}", [](Exchange& ex) {
    throw ApiError(Code::kRouteNotFound,
                   "kiln's SandboxFusion front serves POST run_code, POST run_jupyter "
                   "and GET v1/ping (" +
                       ex.method() + " is not one of them here)");
  });
}

}  // namespace kiln::api
