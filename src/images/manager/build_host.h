// What one image build (builder.h) needs from the rest of kiln, and nothing
// more: the layer store, pins and the store's quota, the key's step cache,
// its images, uploaded contexts and registry access, and a RUN in a
// sandbox. ImageManager is the real one; a unit test fakes it
// (tests/unit/images/manager/builder_test.cc). The builder never sees the
// manager's catalog, the control plane, the engine or the agent's protocol.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/path_ids.h"
#include "common/run_as.h"
#include "common/shape.h"
#include "common/status.h"
#include "images/manager/image_record.h"
#include "images/manager/image_storage.h"
#include "images/parse/image_ref.h"
#include "images/parse/registry_mirror.h"
#include "network/policy.h"
#include "store/image_catalog.h"

namespace kiln::egress {
class Resolver;
class HostAddresses;
}  // namespace kiln::egress

namespace kiln::images {

// How a pull reaches a registry.
struct RegistryAccess {
  std::string skopeo;  // the binary
  // --allow-registry names it: skopeo dials it directly; otherwise through
  // a RegistryNetwork with these (null = the system's).
  bool allowed = false;
  egress::Resolver* resolver = nullptr;
  egress::HostAddresses* host_addresses = nullptr;
  std::optional<store::RegistryCredential> credential;  // the key's, for this registry
  // The operator's pull-through mirror for this registry, if any
  // (--registry-mirror): asked first (image_puller.h).
  std::optional<RegistryMirror> mirror;
};

// One RUN: `argv` in a fresh sandbox on `root`, as `run_as`.
struct SandboxStep {
  std::string owner;     // billed and counted as this key's sandbox
  std::string image_id;  // the image being built (the sandbox's label and image)
  Shape shape;
  int timeout_seconds = 0;  // the sandbox's lease
  network::Policy network;
  std::string root;
  RunAs run_as;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // build args
  std::string cwd;
  std::chrono::steady_clock::time_point deadline;
  // Called with each chunk of output (stream 1 or 2), from the caller's thread.
  std::function<void(int stream, std::string_view data)> output;
  std::function<bool()> cancelled;
  // On exit code 0, what the step changed is written here (ExportUpper's tar).
  std::string upper_tar;
};

struct SandboxStepExit {
  std::optional<std::string> start_error;  // the command could not start
  std::optional<int> exit_code;            // unset: killed by `signal`
  std::optional<std::string> signal;
};

class BuildHost {
 public:
  virtual ~BuildHost() = default;

  virtual ImageStorage& Layers() = 0;
  // Keeps `layer` from collection while builds run.
  virtual void PinLayer(const LayerId& layer) = 0;
  // kQuotaExceeded once the store holds more than its budget.
  virtual Status CheckStoreQuota() = 0;
  // The key's step cache: the layer a step key made (maybe gone since).
  virtual std::optional<std::string> CachedStep(const std::string& owner,
                                                const std::string& key) = 0;
  virtual void CacheStep(const std::string& owner, const std::string& key,
                         const LayerId& layer) = 0;
  // A kiln image the key may build on (its own or the built-in): its record.
  virtual Result<ImageRecord> FindImage(const std::string& ref, const std::string& owner) = 0;
  virtual std::string ContextPath(const std::string& owner, const Sha256Digest& digest) = 0;
  // The layers the key holds (a pull need not unpack those again).
  virtual std::set<LayerId> HeldLayers(const std::string& owner) = 0;
  virtual RegistryAccess Registry(const std::string& owner, const ImageRef& ref) = 0;
  // Runs the step; the sandbox is gone when this returns. kStartupFailed if
  // the sandbox stopped during the step; the capacity refusals; the
  // export's kIoError.
  virtual Result<SandboxStepExit> RunInSandbox(const SandboxStep& step) = 0;
};

}  // namespace kiln::images
