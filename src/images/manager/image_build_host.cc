// ImageManager as its builds' BuildHost (build_host.h): the step cache,
// registry access, and a RUN in a kiln sandbox.
#include <algorithm>

#include "engine/agent_client.h"
#include "images/manager/image_manager.h"

namespace kiln::images {

std::optional<std::string> ImageManager::CachedStep(const std::string& owner,
                                                    const std::string& key) {
  return catalog_.CachedLayer(owner, key);
}

void ImageManager::CacheStep(const std::string& owner, const std::string& key,
                             const LayerId& layer) {
  catalog_.PutCachedLayer(owner, key, layer.str());
}

RegistryAccess ImageManager::Registry(const std::string& owner, const ImageRef& ref) {
  RegistryAccess a;
  a.skopeo = options_.skopeo;
  a.allowed = RegistryAllowed(ref);
  a.resolver = options_.resolver;
  a.host_addresses = options_.host_addresses;
  a.credential = catalog_.Registry(owner, ref.domain);
  for (const RegistryMirror& m : options_.mirrors)
    if (m.Mirrors(ref)) a.mirror = m;
  return a;
}

Result<SandboxStepExit> ImageManager::RunInSandbox(const SandboxStep& step) {
  control::SandboxSpec spec;
  spec.owner = step.owner;
  spec.shape = step.shape;
  spec.timeout_seconds = step.timeout_seconds;
  spec.labels = {{"kiln.image", step.image_id}};
  spec.image = step.image_id;
  spec.rootfs = step.root;
  spec.run_as = step.run_as;
  spec.network = step.network;
  Result<std::shared_ptr<control::Sandbox>> box =
      sandboxes_.Create(spec, step.deadline, step.cancelled);
  if (!box.ok()) return box.status();
  std::shared_ptr<control::Sandbox> sandbox = *box;
  struct Stop {
    control::SandboxManager& sandboxes;
    std::string id;
    ~Stop() { sandboxes.Delete(id); }
  } stop{sandboxes_, sandbox->id()};

  proto::ExecRequest exec;
  exec.argv = step.argv;
  exec.env = step.env;
  exec.cwd = step.cwd;
  exec.timeout_ms = std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(
                                             step.deadline - std::chrono::steady_clock::now())
                                             .count());
  engine::AgentClient client(sandbox->channel());
  engine::ExecRun running = client.Exec(exec);
  engine::ExecEvent ev;
  for (;;) {
    if (!running.Next(&ev, 250)) {
      if (step.cancelled && step.cancelled()) running.Cancel();
      continue;
    }
    if (ev.kind == engine::ExecEvent::kOutput) {
      if (step.output) step.output(ev.stream, ev.data);
    } else if (ev.kind == engine::ExecEvent::kExit) {
      break;
    } else if (ev.kind == engine::ExecEvent::kError) {
      return ev.error;
    } else if (ev.kind == engine::ExecEvent::kClosed) {
      return Status(Code::kStartupFailed, "the build sandbox stopped during the step");
    }
  }
  SandboxStepExit exit;
  exit.start_error = ev.exit.start_error;
  exit.exit_code = ev.exit.exit_code;
  exit.signal = ev.exit.signal;
  if (!exit.start_error && exit.exit_code == 0 && !step.upper_tar.empty()) {
    if (Status s = engine_.ExportUpper(sandbox->id(), step.upper_tar); !s.ok()) return s;
  }
  return exit;
}

}  // namespace kiln::images
