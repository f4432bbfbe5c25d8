// One image build: runs a Dockerfile's stages (a recipe becomes one, an OCI
// pull is a stage of only FROM) and leaves the image's layers and config.
//
// Each RUN runs in a kiln sandbox on the root of the layers so far, with
// the build's shape and egress rules; what it changed is read back with
// the engine's ExportUpper (runsc's rootfs-upper tar) and stored as a
// layer. COPY and ADD write their layer on the host. Every step that makes
// a layer is cached by content: the parent chain, the instruction with the
// environment it sees, and the digest of what it copies (build_cache.h).
// Registry images are pulled by an ImagePuller (image_puller.h).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/run_as.h"
#include "common/status.h"
#include "images/layers/oci_layout.h"
#include "images/manager/build_cache.h"
#include "images/manager/build_host.h"
#include "images/manager/build_log.h"
#include "images/manager/image_puller.h"
#include "images/manager/image_request.h"
#include "images/parse/dockerfile.h"
#include "images/parse/image_ref.h"

namespace kiln::images {

// A stage's result so far.
struct BuiltImage {
  std::vector<LayerId> layers;  // bottom to top
  OciConfig config;
  std::optional<std::string> manifest_digest;  // a pulled image's
  int steps_total = 0, steps_cached = 0;
  int steps_run = 0;          // steps that did work (a RUN run, files copied, a layer unpacked)
  bool cmd_set_here = false;  // CMD or ENTRYPOINT came from this build's last stage
};

// Whether an image name says which registry holds it (then it is pulled).
bool IsRegistryRef(const std::string& text);

class Builder {
 public:
  Builder(BuildHost& host, const ImageRequest& request, std::string image_id,
          std::shared_ptr<BuildLog> log, const std::atomic<bool>& cancelled);

  // Runs the whole build. A failure's details carry what the image's
  // `error` shows (step, line, instruction, exitCode, logTail).
  Result<BuiltImage> Run();

  // The user, home, workdir and env that sandboxes of `image` run with.
  static Result<RunAs> RunAsOf(const std::string& root, const OciConfig& config);

 private:
  Result<BuiltImage> RunDockerfile(const std::string& text, const std::string& context_dir);
  Result<BuiltImage> BaseOf(const Stage& stage, const std::vector<BuiltImage>& done,
                            const std::map<int, int>& stage_slot);
  Result<BuiltImage> Pull(const ImageRef& ref);
  Status RunStep(BuiltImage& st, const RunInstr& run, const Step& step);
  Status CopyStep(BuiltImage& st, const CopyInstr& copy, const Step& step,
                  const std::string& context_dir, const std::vector<BuiltImage>& done,
                  const std::map<int, int>& stage_slot);
  Status WorkdirStep(BuiltImage& st, const Step& step);
  // Unpacks each of the request's named contexts into a folder of its own.
  Status UnpackNamedContexts();
  // True if the cache has `key`'s layer: then it is pinned and put on `st`.
  bool TakeCached(BuiltImage& st, const std::string& key);
  Status CheckTime() const;
  Status CheckSize(const BuiltImage& st) const;
  void Say(const std::string& text) { log_->Line("system", step_, text); }

  BuildHost& host_;
  const ImageRequest& req_;
  std::string image_id_;
  std::shared_ptr<BuildLog> log_;
  const std::atomic<bool>& cancelled_;
  std::chrono::steady_clock::time_point deadline_;
  std::optional<int> step_;  // the step being run (from 1)
  int steps_total_ = 0;
  int steps_cached_ = 0;
  int steps_run_ = 0;
  std::string tmp_dir_;
  StepCache cache_;
  std::optional<ImagePuller> puller_;              // from Run(), once tmp_dir_ exists
  std::map<std::string, std::string> named_dirs_;  // named context -> its unpacked folder
};

}  // namespace kiln::images
