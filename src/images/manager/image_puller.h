// A build's registry pulls (builder.h): an image the build names by its
// registry (`FROM docker.io/python`, or a whole image request) fetched with
// skopeo into an OCI layout, then each of its layers unpacked into the store.
//
// What a registry sends is untrusted. skopeo reaches a registry that an
// operator allows (--allow-registry) directly, any other only through a
// RegistryNetwork (registry_network.h), and an address literal that names
// loopback or a private range is refused before skopeo runs. A layer is
// unpacked even when the store has one of that diff id, unless the
// requester holds it: unpacking is what proves the blob is that layer. An
// image whose every layer the requester holds is taken from its manifest
// and config alone. Credentials go to skopeo in a 0600 file that is removed
// after the pull. Not thread-safe; one ImagePuller per build.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/path_ids.h"
#include "common/status.h"
#include "images/layers/oci_layout.h"
#include "images/manager/build_host.h"
#include "images/parse/image_ref.h"

namespace kiln::images {

// What a pull needs of the build it is part of.
struct PullContext {
  BuildHost& host;
  std::string owner;                               // the requester: its credentials, its layers
  std::string scratch_dir;                         // the build's own temporary directory (exists)
  uint64_t max_layer_bytes = 0;                    // build.maxImageMiB, the bound of each unpack
  std::chrono::steady_clock::time_point deadline;  // the build's
  const std::atomic<bool>& cancelled;              // the image was deleted
  // The build's error once it is cancelled or past its deadline, else Ok.
  std::function<Status()> check_time;
  // A line for the build's log.
  std::function<void(const std::string&)> say;
};

struct PulledImage {
  std::vector<LayerId> layers;  // bottom to top, each pinned
  OciConfig config;
  std::string manifest_digest;  // "sha256:<hex>"
  int layers_unpacked = 0;      // the layers that were not the requester's yet
};

class ImagePuller {
 public:
  explicit ImagePuller(PullContext context) : c_(std::move(context)) {}

  // Pulls `ref` (linux/amd64): through its registry's mirror first when
  // the operator named one (RegistryAccess::mirror), falling back to the
  // registry itself on a kRegistryError unless the mirror is mirror-only.
  // kRegistryError with the registry's (or kiln's refusal's) reason and
  // details {"ref"} (and "refused", "mirror"); the build's cancellation or
  // timeout (check_time); kInvalidImage for a manifest, config or layer
  // that does not hold up; the store's quota.
  Result<PulledImage> Pull(const ImageRef& ref);

 private:
  // One source: the image `name` fetched as `ref` (itself, or its name on
  // a mirror) with `access` to ref's registry.
  Result<PulledImage> PullFrom(const ImageRef& name, const ImageRef& ref,
                               const RegistryAccess& access);
  // How skopeo reaches the registry: directly for one --allow-registry
  // names, else through a RegistryNetwork (null until a pull opens one).
  struct Skopeo;
  // The image from its manifest and config alone when every layer of it is
  // stored already and held by the requester (one of its images or
  // snapshots has it: a digest alone proves nothing); nullopt to pull it
  // whole. A manifest or config that is malformed is an error naming the
  // field, as in a whole pull.
  Result<std::optional<PulledImage>> AlreadyStored(const ImageRef& ref, const std::string& authfile,
                                                   Skopeo& skopeo);

  PullContext c_;
  int pulls_ = 0;           // names each pull's layout directory
  std::set<LayerId> held_;  // the requester's layers, read at each pull
};

}  // namespace kiln::images
