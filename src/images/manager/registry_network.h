// The network a registry pull gets: a fresh network namespace whose only
// way out is an HTTPS proxy in kilnd that dials public addresses alone.
//
// A tenant key names the registry and chooses what it answers, including
// redirects (blob downloads are redirected as a rule) and DNS answers that
// change between a check and a connection. A check of the name before the
// pull stops none of that. So skopeo runs in a network namespace of its
// own, which has only its loopback (a redirect to 127.0.0.1 reaches nothing
// there) and this proxy, listening on that loopback (HTTPS_PROXY). For each
// CONNECT the proxy resolves the name itself and dials only an address
// that is public: never loopback, private, link-local, metadata or
// otherwise reserved (network::RefusedCategory), nor one of the host's own.
// Plain HTTP is refused. Registries an operator names with --allow-registry
// (a registry on the host, on a private network) are pulled from directly,
// as before, and over plain HTTP when they are on loopback.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "egress/resolver.h"

namespace kiln::images {

class RegistryNetwork {
 public:
  struct Options {
    egress::Resolver* resolver = nullptr;   // required
    egress::HostAddresses* host = nullptr;  // the host's own addresses; may be null
    int connect_timeout_ms = 10000;
    int head_timeout_ms = 10000;
    int max_connections = 16;
  };

  // Makes the namespace and the proxy's listener in it. kStartupFailed if
  // the kernel refuses (kilnd needs CAP_SYS_ADMIN, which it has as root).
  static Result<std::unique_ptr<RegistryNetwork>> Open(Options options);
  ~RegistryNetwork();  // stops the proxy, ends its connections
  RegistryNetwork(const RegistryNetwork&) = delete;
  RegistryNetwork& operator=(const RegistryNetwork&) = delete;

  // RunProcess / SpawnProcess inside the namespace, with the proxy in the
  // environment (HTTPS_PROXY, HTTP_PROXY, both spellings).
  ProcessOutput Run(const std::vector<std::string>& argv, int timeout_ms, size_t max_bytes);
  pid_t Spawn(const std::vector<std::string>& argv, int in_fd, int out_fd, int err_fd);

  // What the proxy refused, "host:port: why" each (the pull's error names
  // them: skopeo only says that the proxy answered 403).
  std::vector<std::string> refusals() const;

 private:
  explicit RegistryNetwork(Options options) : options_(options) {}
  std::vector<std::string> Env() const;
  void Accept();
  void Serve(UniqueFd client);
  void Refuse(int fd, const std::string& target, const std::string& why);
  // Calls `fn` with this thread in the namespace, and back in kilnd's after.
  template <typename F>
  auto Inside(F fn) -> decltype(fn());

  Options options_;
  UniqueFd netns_;     // the namespace (an fd of /proc/thread-self/ns/net)
  UniqueFd listener_;  // 127.0.0.1:port in it
  int port_ = 0;
  std::atomic<bool> closing_{false};
  std::atomic<int> open_{0};
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::vector<std::thread> tunnels_;
  std::vector<int> tunnel_fds_;  // shut down on close
  std::vector<std::string> refusals_;
};

}  // namespace kiln::images
