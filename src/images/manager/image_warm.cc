// ImageManager: warm copies (an image booted once, its start command
// ready, kept as a snapshot) and what sandboxes of an image start from.
#include <thread>

#include "common/log.h"
#include "common/time.h"
#include "engine/agent_client.h"
#include "images/manager/image_manager.h"

namespace kiln::images {

using nlohmann::json;

namespace {

constexpr int kWarmRetentionDays = 36500;  // kept as long as the image

// Runs a command to its end; its exit code, or nullopt if it did not run
// to an exit (a start error, a signal, the channel gone).
std::optional<int> RunToEnd(const engine::AgentClient& client, proto::ExecRequest req) {
  engine::ExecRun run = client.Exec(std::move(req));
  engine::ExecEvent ev;
  for (;;) {
    if (!run.Next(&ev, 60000)) return std::nullopt;
    if (ev.kind == engine::ExecEvent::kExit) {
      if (ev.exit.start_error) return std::nullopt;
      return ev.exit.exit_code;
    }
    if (ev.kind == engine::ExecEvent::kError || ev.kind == engine::ExecEvent::kClosed)
      return std::nullopt;
  }
}

// Runs `start`'s ready check until it passes or its time is up.
json ReadyCheckAlone(const engine::AgentClient& client, const StartSpec& start, int64_t t0) {
  int64_t end = t0 + static_cast<int64_t>(start.ready_timeout_seconds) * 1000;
  while (start.ready_command && MonotonicNowMs() < end) {
    proto::ExecRequest probe;
    probe.command = *start.ready_command;
    probe.timeout_ms = std::max<int64_t>(1000, end - MonotonicNowMs());
    if (RunToEnd(client, probe) == 0)
      return json{{"state", "ready"}, {"processId", nullptr}, {"readyMs", MonotonicNowMs() - t0}};
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return json{{"state", "timeout"}, {"processId", nullptr}, {"readyMs", nullptr}};
}

}  // namespace

json ImageManager::StartIn(const std::shared_ptr<control::Sandbox>& sandbox,
                           const StartSpec& start) {
  int64_t t0 = MonotonicNowMs();
  auto channel = sandbox->channel();
  if (!channel) return json{{"state", "not_running"}};
  engine::AgentClient client(channel);
  if (!start.argv && !start.command) {
    // A ready check alone (E2B's set_ready_cmd): what it waits for is the
    // image's own; nothing is started.
    return ReadyCheckAlone(client, start, t0);
  }
  proto::ProcStartRequest p;
  p.argv = start.argv;
  p.command = start.command;
  p.cwd = start.cwd;
  p.env = start.env;
  Result<proto::ProcessInfo> started = client.ProcessStart(p);
  if (!started.ok() || started->pid == 0)
    return json{
        {"state", "not_running"},
        {"error", started.ok() ? "the start command did not start" : started.status().message()}};
  std::string pid = started->id;
  auto exited = [&]() -> std::optional<json> {
    Result<proto::ProcessInfo> now = client.ProcessGet(pid);
    if (now.ok() && now->state == "running") return std::nullopt;
    json j{{"state", "exited"}, {"processId", pid}, {"readyMs", nullptr}};
    if (now.ok() && now->exit_code) j["exitCode"] = *now->exit_code;
    return j;
  };
  int64_t timeout_ms = static_cast<int64_t>(start.ready_timeout_seconds) * 1000;
  bool ready = false;
  if (start.ready_port) {
    proto::ExecRequest wait;
    wait.argv =
        std::vector<std::string>{"/opt/kiln/kiln-agent", "--wait-port",
                                 std::to_string(*start.ready_port), std::to_string(timeout_ms)};
    wait.cwd = "/";
    wait.timeout_ms = timeout_ms + 5000;
    ready = RunToEnd(client, wait) == 0;
  } else if (start.ready_command) {
    int64_t end = MonotonicNowMs() + timeout_ms;
    while (!ready && MonotonicNowMs() < end) {
      proto::ExecRequest probe;
      probe.command = *start.ready_command;
      // A probe may take the time left: E2B's wait_for_timeout is a
      // `sleep N` that must be let finish; a failed one is tried again.
      probe.timeout_ms = std::max<int64_t>(1000, end - MonotonicNowMs());
      ready = RunToEnd(client, probe) == 0;
      if (!ready) {
        if (auto gone = exited()) return *gone;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  } else {
    // Nothing to wait for: started is all that can be said.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (auto gone = exited()) return *gone;
    return json{{"state", "started"}, {"processId", pid}, {"readyMs", MonotonicNowMs() - t0}};
  }
  if (!ready) {
    if (auto gone = exited()) return *gone;
    return json{{"state", "timeout"}, {"processId", pid}, {"readyMs", nullptr}};
  }
  return json{{"state", "ready"}, {"processId", pid}, {"readyMs", MonotonicNowMs() - t0}};
}

Status ImageManager::Warm(Job& job, ImageRecord& record) {
  auto log = LogOf(job.image_id);
  // A host too small for the default shape never restores a warm copy of it
  // (only creates of that shape do): the image is ready without one.
  if (!sandboxes_.ShapeEverFits(WarmShapeOf(record))) {
    log->Line("system", std::nullopt,
              "not warmed: the image's shape does not fit this host's capacity");
    return Status::Ok();
  }
  log->Line("system", std::nullopt, "warming: booting the image once and keeping it ready");
  Result<std::string> root = storage_.EnsureRoot(record.layers);
  if (!root.ok()) return root.status();
  control::SandboxSpec spec;
  spec.owner = record.owner;
  spec.shape = WarmShapeOf(record);
  spec.image = job.image_id;  // no labels: copies of the warm copy inherit them
  spec.rootfs = *root;
  spec.run_as = record.run_as.value_or(RunAs{});
  spec.sudo = record.sudo;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  Result<std::shared_ptr<control::Sandbox>> box =
      sandboxes_.Create(spec, deadline, [&job] { return job.cancelled.load(); });
  if (!box.ok()) return box.status();
  struct Stop {
    control::SandboxManager& m;
    std::string id;
    ~Stop() { m.Delete(id); }
  } stop{sandboxes_, (*box)->id()};
  json warm = json::object();
  if (record.start) {
    const StartSpec& start = *record.start;
    json info = StartIn(*box, start);
    log->Line("system", std::nullopt, "start: " + info.dump());
    std::string state = info.value("state", "");
    if (state != "ready" && state != "started") {
      std::vector<std::string> tail;
      if (info.contains("processId") && info["processId"].is_string()) {
        engine::AgentClient client((*box)->channel());
        auto out = client.ProcessOutput(info["processId"], 0, 0, 5000);
        if (out.ok()) {
          for (const auto& chunk : out->chunks) log->Write(chunk.stream, std::nullopt, chunk.data);
        }
      }
      log->Close();
      json details{{"code", "start_failed"}, {"start", info}};
      return Status(Code::kInvalidRequest,
                    "the start command did not become ready (" + state + ") within " +
                        std::to_string(start.ready_timeout_seconds) + " s",
                    details);
    }
    warm["processId"] = info["processId"];
    warm["readyMs"] = info["readyMs"];
    warm["state"] = state;
  }
  control::SnapshotOptions opts;
  opts.retention_days = kWarmRetentionDays;
  opts.pool = false;
  opts.image_warm = true;
  Result<store::SnapshotRecord> snap = sandboxes_.Snapshot(*box, opts);
  if (!snap.ok()) return snap.status();
  warm["snapshotBytes"] = snap->size_bytes;
  record.warm_snapshot = snap->id;
  record.warm = warm;
  log->Line(
      "system", std::nullopt,
      "warm copy ready (" + std::to_string(snap->size_bytes >> 20) + " MiB of memory and changes)");
  Save(record);
  return Status::Ok();
}

void ImageManager::WarmBuiltinLater() {
  std::lock_guard lock(mu_);
  if (warming_base_) return;
  warming_base_ = true;
  warmer_ = std::jthread([this](std::stop_token) {
    std::optional<ImageRecord> record = Load(builtin_id_);
    if (!record) return;
    Job job;
    job.image_id = builtin_id_;
    Status s = Warm(job, *record);
    if (!s.ok()) {
      LogWarn("cannot warm the built-in image", {{"error", s.ToString()}});
      std::lock_guard relock(mu_);
      warming_base_ = false;  // a later create tries again
    }
  });
}

Result<ImageLaunch> ImageManager::ForSandbox(const std::string& ref,
                                             const std::optional<std::string>& owner,
                                             const Shape& requested, const ShapeGiven& given) {
  Result<ImageRecord> found = Resolve(ref, owner);
  if (!found.ok()) return found.status();
  const ImageRecord& r = *found;
  std::string state(ImageStateName(r.state));
  if (r.state == ImageState::kQueued || r.state == ImageState::kBuilding)
    return Status(Code::kBuildInProgress,
                  "image " + ref + " is " + state + "; wait for it to be ready",
                  json{{"imageId", r.id}});
  if (r.state == ImageState::kFailed)
    return Status(Code::kInvalidRequest,
                  "image " + ref + " failed to build: " +
                      (r.error.is_object() ? r.error.value("message", std::string("unknown"))
                                           : std::string("unknown")),
                  json{{"imageId", r.id}});
  if (r.state != ImageState::kReady)
    return Status(Code::kImageNotFound, "image " + ref + " is " + state);
  ImageLaunch l;
  l.image_id = r.id;
  const Shape shape = ShapeOver(requested, given, WarmShapeOf(r));
  l.shape = shape;
  if (r.source == ImageSource::kBuiltin) {
    l.rootfs = options_.base_rootfs;
  } else {
    Result<std::string> root = storage_.EnsureRoot(r.layers);
    if (!root.ok()) return root.status();
    l.rootfs = *root;
  }
  if (r.run_as) l.run_as = *r.run_as;
  l.start = r.start;
  l.sudo = r.sudo;
  if (r.warm_snapshot) {
    if (shape == WarmShapeOf(r) && sandboxes_.snapshots().Find(*r.warm_snapshot))
      l.warm_snapshot = r.warm_snapshot;
    l.warm_start = r.warm.is_null() ? json::object() : r.warm;
  } else if (r.source == ImageSource::kBuiltin) {
    WarmBuiltinLater();
  }
  return l;
}

}  // namespace kiln::images
