#include "images/manager/image_puller.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/base64.h"
#include "common/digest.h"
#include "common/json_bounded.h"
#include "common/subprocess.h"
#include "common/time.h"
#include "common/unique_fd.h"
#include "images/layers/flatten.h"
#include "images/layers/layer_unpack.h"
#include "images/manager/registry_network.h"
#include "network/address.h"

namespace kiln::images {

namespace fs = std::filesystem;
using nlohmann::json;

struct ImagePuller::Skopeo {
  std::string binary;
  std::unique_ptr<RegistryNetwork> net;  // null: direct (an allowed registry)
  ProcessOutput Run(const std::vector<std::string>& argv, int timeout_ms, size_t max_bytes) {
    return net ? net->Run(argv, timeout_ms, max_bytes) : RunProcess(argv, timeout_ms, max_bytes);
  }
  pid_t Spawn(const std::vector<std::string>& argv, int err_fd) {
    return net ? net->Spawn(argv, -1, -1, err_fd) : SpawnProcess(argv, -1, -1, err_fd);
  }
  // What the proxy refused, for the pull's error.
  std::string Refused() const {
    std::string out;
    for (const auto& r : net ? net->refusals() : std::vector<std::string>{})
      out += (out.empty() ? "" : "; ") + r;
    return out;
  }
};

Result<PulledImage> ImagePuller::Pull(const ImageRef& ref) {
  RegistryAccess access = c_.host.Registry(c_.owner, ref);
  if (access.mirror) {
    // The mirror first, under the image's own repository and tag; its
    // answer is checked as the registry's would be (the digests and diff
    // ids in what it sends), so a mirror can serve a tag but not forge one
    // of the key's layers.
    const RegistryMirror& mirror = *access.mirror;
    ImageRef served = mirror.On(ref);
    c_.say("pulling " + ref.String() + " through the mirror " + mirror.String());
    Result<PulledImage> got = PullFrom(ref, served, c_.host.Registry(c_.owner, served));
    if (got.ok() || got.status().code() != Code::kRegistryError) return got;
    if (mirror.only) {
      json d = got.status().details().is_object() ? got.status().details() : json::object();
      d["mirror"] = mirror.String();
      return Status(Code::kRegistryError,
                    got.status().message() + " (--registry-mirror-only " + mirror.registry +
                        ": not pulled from " + mirror.registry + " itself)",
                    d);
    }
    c_.say("the mirror could not serve it (" + got.status().message() + "): pulling from " +
           ref.domain + " itself");
  }
  return PullFrom(ref, ref, access);
}

Result<PulledImage> ImagePuller::PullFrom(const ImageRef& name, const ImageRef& ref,
                                          const RegistryAccess& access) {
  std::string layout = c_.scratch_dir + "/pull-" + std::to_string(++pulls_);
  std::vector<std::string> args = {access.skopeo,   "copy",  "--retry-times",   "0",
                                   "--override-os", "linux", "--override-arch", "amd64"};
  Skopeo skopeo;
  skopeo.binary = access.skopeo;
  bool allowed = access.allowed;
  if (!allowed) {
    // An address literal that is refused says so here: skopeo (Go) dials
    // loopback directly, past the proxy, and would only report a refused
    // connection on the namespace's own loopback.
    std::string refused = ref.Host() == "localhost" ? "loopback" : "";
    if (auto literal = network::ParseIpLiteral(ref.Host()))
      refused = network::RefusedCategory(*literal);
    if (!refused.empty())
      return Status(Code::kRegistryError,
                    "cannot pull " + ref.String() + ": " + ref.domain + " is a " + refused +
                        " address, refused (an operator allows a registry with --allow-registry)",
                    json{{"ref", ref.String()}});
  }
  if (!allowed) {
    RegistryNetwork::Options o;
    o.resolver = access.resolver;
    o.host = access.host_addresses;
    Result<std::unique_ptr<RegistryNetwork>> net = RegistryNetwork::Open(o);
    if (!net.ok()) return net.status();
    skopeo.net = std::move(*net);
  }
  bool plain_http = allowed && ref.IsLoopback();
  if (plain_http) args.push_back("--src-tls-verify=false");
  std::string authfile;
  if (const auto& cred = access.credential) {
    authfile = c_.scratch_dir + "/auth.json";
    std::string pair = cred->username + ":" + cred->password;
    // Made 0600 by the open itself: never readable by others, not even
    // between a create and a chmod.
    UniqueFd f(
        ::open(authfile.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!f ||
        !WriteAll(f.get(), json{{"auths", {{ref.domain, {{"auth", Base64Encode(pair)}}}}}}.dump()))
      return Status(Code::kIoError, "cannot write the pull's credentials file");
    args.insert(args.end(), {"--src-authfile", authfile});
  } else {
    args.push_back("--src-no-creds");
  }
  args.push_back("docker://" + ref.String());
  args.push_back("oci:" + layout + ":kiln");
  held_ = c_.host.HeldLayers(c_.owner);
  Result<std::optional<PulledImage>> stored = AlreadyStored(ref, authfile, skopeo);
  if (!stored.ok() || *stored) {
    if (!authfile.empty()) fs::remove(authfile);
    if (!stored.ok()) return stored.status();
    return **stored;
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  c_.deadline - std::chrono::steady_clock::now())
                  .count();
  int64_t t0 = MonotonicNowMs();
  // skopeo's stderr to a file, and a watcher that kills it when the build
  // is deleted or kilnd stops: a pull must not hold either up.
  std::string err_path = c_.scratch_dir + "/skopeo.err";
  int status = -1;
  {
    UniqueFd err(::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    pid_t pid = skopeo.Spawn(args, err.get());
    if (pid < 0) return Status(Code::kInternal, "cannot run " + args[0]);
    std::atomic<bool> over{false};
    std::jthread watcher([&] {
      while (!over) {
        if (c_.cancelled) {
          ::kill(pid, SIGKILL);
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
    status = WaitProcess(pid, static_cast<int>(std::max<int64_t>(1000, left)));
    over = true;
  }
  if (!authfile.empty()) fs::remove(authfile);
  if (Status t = c_.check_time(); !t.ok()) return t;
  if (status != 0) {
    std::string why;
    {
      std::ifstream f(err_path);
      std::string line;
      while (std::getline(f, line))
        if (!line.empty()) why = line;  // skopeo's last word is its reason
    }
    if (why.empty()) why = "skopeo failed (status " + std::to_string(status) + ")";
    if (status == -1) why = "no answer within the build's timeout";
    json details{{"ref", ref.String()}};
    if (std::string refused = skopeo.Refused(); !refused.empty()) {
      why = "kiln refused its connection to " + refused;
      details["refused"] = refused;
    }
    return Status(Code::kRegistryError, "cannot pull " + ref.String() + ": " + why, details);
  }
  Result<OciImage> oci = ReadOciLayout(layout);
  if (!oci.ok()) return oci.status();
  c_.say("pulled " + name.String() + (ref == name ? "" : " from " + ref.String()) + " (" +
         oci->manifest_digest + ", " + std::to_string(oci->layers.size()) + " layers) in " +
         std::to_string(MonotonicNowMs() - t0) + " ms");
  PulledImage b;
  b.config = oci->config;
  b.manifest_digest = oci->manifest_digest;
  for (const auto& layer : oci->layers) {
    if (Status t = c_.check_time(); !t.ok()) return t;
    LayerId id = LayerId::Of(layer.diff_id);
    std::string shown = layer.diff_id.hex().substr(0, 12);
    // A layer the requester holds is not unpacked again. Any other is, even
    // when the store has one of that diff id: unpacking is what proves the
    // blob is that layer (a registry may name another tenant's diff id in
    // its config); AddLayerTar then keeps the stored one.
    if (held_.count(id) && c_.host.Layers().Layer(id)) {
      c_.say("layer " + shown + ": already stored");
    } else {
      UnpackOptions opts;
      opts.expected_blob_sha256 = layer.digest.hex();
      opts.expected_diff_id = layer.diff_id.hex();
      opts.max_bytes = c_.max_layer_bytes;
      Result<LayerInfo> added = c_.host.Layers().AddLayerTar(layer.blob_path, opts);
      if (!added.ok()) return added.status();
      ++b.layers_unpacked;
      held_.insert(id);
      c_.say("layer " + shown + ": " + std::to_string(added->bytes) + " bytes, " +
             std::to_string(added->files) + " files");
    }
    c_.host.PinLayer(id);
    b.layers.push_back(id);
    if (Status q = c_.host.CheckStoreQuota(); !q.ok()) return q;
  }
  (void)RemoveTree(layout);
  return b;
}

Result<std::optional<PulledImage>> ImagePuller::AlreadyStored(const ImageRef& ref,
                                                              const std::string& authfile,
                                                              Skopeo& skopeo) {
  // skopeo copy fetches every blob into a fresh layout, stored or not; an
  // image whose layers the requester holds needs only its manifest and
  // config. What the registry sends is untrusted: bounded, hashed, and
  // parsed as a whole pull's would be.
  std::vector<std::string> base = {skopeo.binary, "inspect", "--raw", "--retry-times", "0"};
  if (!skopeo.net && ref.IsLoopback()) base.push_back("--tls-verify=false");
  if (authfile.empty()) {
    base.push_back("--no-creds");
  } else {
    base.insert(base.end(), {"--authfile", authfile});
  }
  std::vector<std::string> manifest_args = base, config_args = base;
  manifest_args.push_back("docker://" + ref.String());
  config_args.insert(config_args.end(), {"--config", "docker://" + ref.String()});
  constexpr size_t kMaxMetadata = 4u << 20;
  ProcessOutput manifest = skopeo.Run(manifest_args, 30000, kMaxMetadata);
  if (!manifest.ok()) return std::optional<PulledImage>();  // the copy will say why
  std::optional<json> m = ParseJsonBounded(manifest.out);
  // An index (several platforms) goes the long way: the copy picks one.
  if (!m || !m->is_object() || m->contains("manifests")) return std::optional<PulledImage>();
  std::string manifest_digest = Sha256Digest::Of(manifest.out).str();
  ProcessOutput config = skopeo.Run(config_args, 30000, kMaxMetadata);
  if (!config.ok()) return std::optional<PulledImage>();
  const json config_digest = (*m).value("config", json::object()).value("digest", json());
  if (config_digest != Sha256Digest::Of(config.out).str())
    return Status(Code::kInvalidImage,
                  "the registry's config for " + ref.String() + " does not match its digest",
                  json{{"field", "config.digest"}});
  std::string why;
  std::optional<json> c = ParseJsonBounded(config.out, &why);
  if (!c) return Status(Code::kInvalidImage, "config " + why, json{{"field", "config"}});
  Result<OciImage> image = ParseImageManifest(*m, manifest_digest, *c);
  if (!image.ok()) return image.status();
  PulledImage b;
  for (const OciLayer& l : image->layers) {
    LayerId id = LayerId::Of(l.diff_id);
    if (!held_.count(id) || !c_.host.Layers().Layer(id)) return std::optional<PulledImage>();
    b.layers.push_back(id);
  }
  for (const auto& l : b.layers) c_.host.PinLayer(l);
  b.config = image->config;
  b.manifest_digest = manifest_digest;
  c_.say("every layer of " + ref.String() + " is stored: only its manifest and config fetched");
  return std::optional<PulledImage>(std::move(b));
}

}  // namespace kiln::images
