// The build cache (builder.h): every step that makes a layer is named by a
// key over what decides that layer's content, and the requester's step
// cache maps each key to the layer it made last time.
//
// A key is the lowercase hex sha256 of a JSON object holding the step's
// kind ("op"), the chain id of the layers below it ("parent") and the
// step's inputs: a RUN its argv, the environment and build args it sees,
// its user, workdir and network rules; a COPY or ADD the destination, the
// digest of its sources' contents (CopySourcesDigest in
// images/context/copy_step.h), its --chown as written and --chmod; a
// WORKDIR its path. Keys are stored (in the step cache, and as the id of
// COPY and WORKDIR layers), so the objects must not change: the same inputs
// give the same key in every kiln version. Thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "common/path_ids.h"
#include "images/layers/oci_layout.h"
#include "images/manager/build_host.h"
#include "images/parse/dockerfile.h"
#include "network/policy.h"

namespace kiln::images {

// `parent` is ImageStorage::ChainId(layers below the step).hex().
std::string RunStepKey(const std::string& parent, const RunInstr& run, const OciConfig& config,
                       const network::Policy& network);
// `dest` is the absolute destination (WORKDIR applied); `sources_digest`
// is CopySourcesDigest's.
std::string CopyStepKey(const std::string& parent, const CopyInstr& copy, const std::string& dest,
                        const std::string& sources_digest);
// The id of the one-directory layer that makes a missing WORKDIR `path`.
LayerId WorkdirLayerId(const std::string& parent, const std::string& path);

// The requester's step cache, as one build sees it.
class StepCache {
 public:
  // `enabled` false (the request's cache: false) finds nothing but still stores.
  StepCache(BuildHost& host, std::string owner, bool enabled)
      : host_(host), owner_(std::move(owner)), enabled_(enabled) {}

  // The layer `key` made, if caching is on and the layer is still stored.
  std::optional<LayerId> Find(const std::string& key) const;
  void Store(const std::string& key, const LayerId& layer);

 private:
  BuildHost& host_;
  std::string owner_;
  bool enabled_;
};

}  // namespace kiln::images
