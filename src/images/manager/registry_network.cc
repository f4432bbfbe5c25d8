#include "images/manager/registry_network.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <type_traits>

#include "common/log.h"
#include "common/time.h"
#include "egress/proxy_request.h"
#include "network/address.h"

namespace kiln::images {

namespace {

constexpr size_t kMaxHead = 8192;
constexpr size_t kMaxTunnels = 256;  // connections over one pull
constexpr int kIdleMs = 300000;      // a tunnel with no bytes either way for this long ends

UniqueFd CurrentNetns() {
  return UniqueFd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
}

Status Errno(const std::string& what) {
  return Status(Code::kStartupFailed,
                "cannot make the pull's network namespace: " + what + ": " + std::strerror(errno));
}

// This thread's network namespace, put back when the guard goes. A thread
// left in the pull's namespace would make every later socket of it there.
class NetnsGuard {
 public:
  NetnsGuard() : home_(CurrentNetns()) {}
  ~NetnsGuard() {
    if (home_ && ::setns(home_.get(), CLONE_NEWNET) != 0) {
      LogError("cannot return a thread to kilnd's network namespace", {{"error", strerror(errno)}});
      std::terminate();  // every socket it opened later would be in the wrong place
    }
  }
  bool ok() const { return static_cast<bool>(home_); }

 private:
  UniqueFd home_;
};

Result<UniqueFd> Dial(const network::Address& a, uint16_t port, int timeout_ms) {
  sockaddr_storage sa{};
  socklen_t len = a.ToSockaddr(port, &sa);
  UniqueFd fd(::socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return Status(Code::kIoError, std::strerror(errno));
  int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), len);
  if (rc < 0 && errno == EINPROGRESS) {
    pollfd p{fd.get(), POLLOUT, 0};
    rc = ::poll(&p, 1, timeout_ms);
    if (rc <= 0) return Status(Code::kIoError, "timed out");
    int err = 0;
    socklen_t elen = sizeof err;
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &elen);
    rc = err == 0 ? 0 : -1;
    errno = err;
  }
  if (rc < 0) return Status(Code::kIoError, std::strerror(errno));
  return fd;
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 10000) <= 0) return false;
      continue;
    }
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

template <typename F>
auto RegistryNetwork::Inside(F fn) -> decltype(fn()) {
  NetnsGuard back;
  if (!back.ok() || ::setns(netns_.get(), CLONE_NEWNET) != 0) {
    LogError("cannot enter a pull's network namespace", {{"error", strerror(errno)}});
    using R = decltype(fn());
    if constexpr (std::is_same_v<R, pid_t>) {
      return -1;
    } else {
      return R{};  // a ProcessOutput that did not run
    }
  }
  return fn();
}

Result<std::unique_ptr<RegistryNetwork>> RegistryNetwork::Open(Options options) {
  std::unique_ptr<RegistryNetwork> n(new RegistryNetwork(options));
  {
    NetnsGuard back;
    if (!back.ok()) return Errno("open /proc/thread-self/ns/net");
    if (::unshare(CLONE_NEWNET) != 0) return Errno("unshare");
    // Its loopback up (a new namespace's starts down), for the listener.
    UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    if (!s || ::ioctl(s.get(), SIOCGIFFLAGS, &ifr) != 0) return Errno("read lo's flags");
    ifr.ifr_flags |= IFF_UP;
    if (::ioctl(s.get(), SIOCSIFFLAGS, &ifr) != 0) return Errno("bring lo up");
    n->listener_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (!n->listener_ || ::bind(n->listener_.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(n->listener_.get(), 32) != 0 ||
        ::getsockname(n->listener_.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      return Errno("listen");
    n->port_ = ntohs(addr.sin_port);
    n->netns_ = CurrentNetns();
    if (!n->netns_) return Errno("open the new namespace");
  }
  try {
    n->acceptor_ = std::thread([raw = n.get()] { raw->Accept(); });
  } catch (const std::system_error& e) {
    return Status(Code::kStartupFailed, std::string("no thread for the pull's proxy: ") + e.what());
  }
  return n;
}

RegistryNetwork::~RegistryNetwork() {
  closing_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> tunnels;
  {
    std::lock_guard lock(mu_);
    for (int fd : tunnel_fds_) ::shutdown(fd, SHUT_RDWR);
    tunnels.swap(tunnels_);
  }
  for (auto& t : tunnels) t.join();
}

std::vector<std::string> RegistryNetwork::Env() const {
  std::string url = "http://127.0.0.1:" + std::to_string(port_);
  return {"HTTPS_PROXY=" + url, "https_proxy=" + url, "HTTP_PROXY=" + url,
          "http_proxy=" + url,  "NO_PROXY=",          "no_proxy="};
}

ProcessOutput RegistryNetwork::Run(const std::vector<std::string>& argv, int timeout_ms,
                                   size_t max_bytes) {
  return Inside([&] { return RunProcess(argv, timeout_ms, max_bytes, Env()); });
}

pid_t RegistryNetwork::Spawn(const std::vector<std::string>& argv, int in_fd, int out_fd,
                             int err_fd) {
  return Inside([&] { return SpawnProcess(argv, in_fd, out_fd, err_fd, Env()); });
}

std::vector<std::string> RegistryNetwork::refusals() const {
  std::lock_guard lock(mu_);
  return refusals_;
}

void RegistryNetwork::Accept() {
  while (!closing_) {
    pollfd p{listener_.get(), POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    UniqueFd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!client) continue;
    std::lock_guard lock(mu_);
    // Closed: too many at once, or in all (a registry that makes its client
    // reconnect forever gets a bounded number of threads).
    if (open_.load() >= options_.max_connections || tunnels_.size() >= kMaxTunnels) continue;
    int fd = client.get();
    try {
      tunnels_.emplace_back([this, c = std::move(client)]() mutable { Serve(std::move(c)); });
      tunnel_fds_.push_back(fd);
      ++open_;
    } catch (const std::system_error&) {
      // No thread to spare: this connection is refused (closed with `client`).
    }
  }
}

void RegistryNetwork::Refuse(int fd, const std::string& target, const std::string& why) {
  {
    std::lock_guard lock(mu_);
    if (refusals_.size() < 16) refusals_.push_back(target + ": " + why);
  }
  LogWarn("a registry pull's connection refused", {{"target", target}, {"why", why}});
  SendAll(fd, egress::ProxyAnswer(403, "registry-refused", "kiln: " + why + "\n"));
}

void RegistryNetwork::Serve(UniqueFd client) {
  struct Done {
    RegistryNetwork& n;
    int fd;
    ~Done() {
      std::lock_guard lock(n.mu_);
      std::erase(n.tunnel_fds_, fd);
      --n.open_;
    }
  } done{*this, client.get()};
  // The head: CONNECT host:port, within kMaxHead bytes and head_timeout_ms.
  egress::ProxyRequestParser parser;
  int64_t deadline = MonotonicNowMs() + options_.head_timeout_ms;
  size_t got = 0;
  char buf[16384];
  egress::ProxyRequestParser::Result r = egress::ProxyRequestParser::Result::kIncomplete;
  while (r == egress::ProxyRequestParser::Result::kIncomplete) {
    int64_t left = deadline - MonotonicNowMs();
    pollfd p{client.get(), POLLIN, 0};
    if (left <= 0 || closing_ || ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 200))) < 0)
      return;
    if (!(p.revents & (POLLIN | POLLHUP))) continue;
    ssize_t n = ::recv(client.get(), buf, sizeof buf, 0);
    if (n <= 0) return;
    got += static_cast<size_t>(n);
    if (got > kMaxHead) return Refuse(client.get(), "?", "a proxy request head over 8 KiB");
    r = parser.Feed(std::string_view(buf, static_cast<size_t>(n)));
  }
  if (r == egress::ProxyRequestParser::Result::kBad)
    return Refuse(client.get(), "?", "a malformed proxy request: " + parser.error());
  const egress::ProxyRequest& req = parser.request();
  std::string target = req.host + ":" + std::to_string(req.port);
  if (!req.connect)
    return Refuse(client.get(), target,
                  "plain HTTP to a registry is refused (HTTPS only, unless --allow-registry "
                  "names the registry)");
  // The addresses to dial: a literal as it is, a name as kilnd resolves it
  // now (and dials exactly what it checked).
  std::vector<network::Address> addresses;
  if (auto literal = network::ParseIpLiteral(req.host)) {
    addresses.push_back(*literal);
  } else {
    Result<std::string> host = network::NormalizeHost(req.host);
    if (!host.ok()) return Refuse(client.get(), target, "the host " + host.status().message());
    Result<std::vector<network::Address>> resolved = options_.resolver->Resolve(*host);
    if (!resolved.ok())
      return Refuse(client.get(), target, "cannot resolve it: " + resolved.status().message());
    addresses = std::move(*resolved);
  }
  std::vector<network::Address> own;
  if (options_.host) own = options_.host->Get();
  std::string refused;
  UniqueFd upstream;
  std::string dial_error;
  for (const network::Address& a : addresses) {
    std::string category = network::RefusedCategory(a);
    bool is_own = std::find(own.begin(), own.end(), network::Unmapped(a)) != own.end();
    if (!category.empty() || is_own) {
      refused = a.ToString() + " (" + (category.empty() ? "this host" : category) + ")";
      continue;
    }
    Result<UniqueFd> fd = Dial(a, req.port, options_.connect_timeout_ms);
    if (fd.ok()) {
      upstream = std::move(*fd);
      break;
    }
    dial_error = a.ToString() + ": " + fd.status().message();
  }
  if (!upstream) {
    if (!refused.empty() && dial_error.empty())
      return Refuse(client.get(), target,
                    "it is at " + refused +
                        ": pulls reach public registries only (--allow-registry names others)");
    SendAll(client.get(), egress::ProxyAnswer(502, "connect-failed",
                                              "kiln: cannot connect: " + dial_error + "\n"));
    return;
  }
  if (!SendAll(client.get(), egress::ConnectEstablished()) ||
      !SendAll(upstream.get(), parser.rest()))
    return;
  {
    std::lock_guard lock(mu_);
    tunnel_fds_.push_back(upstream.get());
  }
  // Both ways until either side ends, the pull ends, or both are idle.
  int64_t idle_until = MonotonicNowMs() + kIdleMs;
  int fds[2] = {client.get(), upstream.get()};
  while (!closing_ && MonotonicNowMs() < idle_until) {
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    if (::poll(p, 2, 500) <= 0) continue;
    bool over = false;
    for (int i = 0; i < 2 && !over; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::recv(fds[i], buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      over = n <= 0 || !SendAll(fds[1 - i], std::string_view(buf, static_cast<size_t>(n)));
      idle_until = MonotonicNowMs() + kIdleMs;
    }
    if (over) break;
  }
  std::lock_guard lock(mu_);
  std::erase(tunnel_fds_, upstream.get());
}

}  // namespace kiln::images
