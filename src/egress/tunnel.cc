#include "egress/tunnel.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>

#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "egress/egress.h"
#include "egress/proxy_request.h"

namespace kiln::egress {

using engine::ByteLink;
using network::Address;
using network::Verdict;

namespace {

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// When several addresses are refused, report the most specific reason.
int Rank(Verdict v) {
  switch (v) {
    case Verdict::kDenied:
      return 4;
    case Verdict::kPrivateAddress:
      return 3;
    case Verdict::kNotAllowed:
      return 2;
    case Verdict::kInternetOff:
      return 1;
    default:
      return 0;
  }
}

std::string RefusalText(Verdict v, const std::string& host, const std::string& address) {
  std::string target = address.empty() || address == host ? host : host + " (" + address + ")";
  switch (v) {
    case Verdict::kInternetOff:
      return "kiln: egress refused: this sandbox's network policy has internet off";
    case Verdict::kNotAllowed:
      return "kiln: egress refused: " + target + " is not in this sandbox's allow list";
    case Verdict::kDenied:
      return "kiln: egress refused: " + target + " is in this sandbox's deny list";
    case Verdict::kPrivateAddress:
      return "kiln: egress refused: " + target +
             " is a private, loopback, link-local, metadata or host address";
    default:
      return "kiln: egress refused";
  }
}

}  // namespace

Tunnel::Tunnel(Gate& gate, ByteLink link)
    : gate_(gate), link_(std::move(link)), start_mono_ms_(MonotonicNowMs()) {
  entry_.sandbox_id = gate.sandbox_id();
  entry_.start_ms = NowMs();
}

Tunnel::~Tunnel() {
  if (fd_ >= 0) ::close(fd_);
}

void Tunnel::Run() {
  // Registered from the start, so that Close() and policy changes reach a
  // connection in every phase: reading its head, dialling, carrying bytes.
  if (!gate_.Register(shared_from_this())) return;
  Serve();
  gate_.Unregister(this);
}

void Tunnel::Serve() {
  std::string rest;
  if (!ReadHead(&rest) || !Decide()) return;
  {
    std::lock_guard lock(mu_);
    dialled_set_ = true;
  }
  // A policy change while we decided was applied only to connections that
  // had dialled: check this one against the rules in force now.
  Recheck(*gate_.matcher(), gate_.service().host_addresses().Get());
  entry_.open = true;
  int64_t seq = gate_.service().log().Add(entry_);
  metrics::Inc("kiln_egress_connections_total", {{"verdict", "allowed"}});
  Pump(rest);
  std::string closed_by;
  {
    std::lock_guard lock(mu_);
    closed_by = cut_by_;
    ::close(fd_);
    fd_ = -1;
  }
  if (closed_by.empty()) closed_by = entry_.closed_by;
  gate_.service().log().Close(seq, bytes_out_, bytes_in_, MonotonicNowMs() - start_mono_ms_,
                              closed_by);
}

bool Tunnel::cut() {
  std::lock_guard lock(mu_);
  return !cut_by_.empty();
}

bool Tunnel::ReadHead(std::string* rest) {
  ProxyRequestParser parser;
  int64_t deadline = MonotonicNowMs() + gate_.service().options().head_timeout_ms;
  for (std::string data;;) {
    int64_t left = deadline - MonotonicNowMs();
    bool end = false;
    auto got =
        left <= 0 ? ByteLink::Got::kTimeout : link_.Receive(&data, &end, static_cast<int>(left));
    if (got == ByteLink::Got::kTimeout) {
      entry_.method = "?";
      Refuse(408, "bad-request", "kiln: no proxy request within the time allowed");
      return false;
    }
    if (got == ByteLink::Got::kEnded) return false;
    auto r = parser.Feed(data);
    if (r == ProxyRequestParser::Result::kBad) {
      entry_.method = "?";
      Refuse(400, "bad-request", "kiln: " + parser.error());
      return false;
    }
    if (r == ProxyRequestParser::Result::kComplete) break;
    if (end) return false;  // the client gave up mid-head
  }
  const ProxyRequest& req = parser.request();
  entry_.method = req.method;
  entry_.port = req.port;
  connect_ = req.connect;
  upstream_head_ = req.upstream_head;
  *rest = parser.rest();
  entry_.host = req.host;
  return true;
}

bool Tunnel::Decide() {
  EgressService& svc = gate_.service();
  std::shared_ptr<const network::Matcher> matcher = gate_.matcher();
  std::vector<Address> addresses;
  if (auto literal = network::ParseIpLiteral(entry_.host)) {
    entry_.host = literal->ToString();
    addresses.push_back(*literal);
  } else {
    auto normal = network::NormalizeHost(entry_.host);
    if (!normal.ok()) {
      Refuse(400, "bad-request",
             "kiln: bad host '" + entry_.host + "': " + normal.status().message());
      return false;
    }
    std::string host = *normal;
    entry_.host = host;
    // Refusals that need no lookup make none: a DNS query leaks data too.
    if (auto v = matcher->CheckName(host)) {
      Refuse(403, network::VerdictName(*v), RefusalText(*v, host, ""));
      return false;
    }
    // The operator's internal endpoints are named by kilnd, not by DNS.
    const network::InternalEndpoint* internal = svc.options().internal.ByName(host);
    auto resolved = internal ? Result<std::vector<Address>>(std::vector<Address>{internal->address})
                             : svc.resolver().Resolve(host);
    if (!resolved.ok()) {
      Refuse(502, "resolve-failed",
             "kiln: cannot resolve " + host + ": " + resolved.status().message());
      return false;
    }
    addresses = std::move(*resolved);
  }
  std::vector<Address> own = svc.host_addresses().Get();
  Verdict refusal = Verdict::kAllowed;
  std::string refused_address;
  Status connect_error;
  bool tried = false;
  for (const Address& a : addresses) {
    Verdict v = matcher->Check(entry_.host, a, entry_.port, own, svc.options().internal);
    if (v != Verdict::kAllowed) {
      if (Rank(v) > Rank(refusal)) {
        refusal = v;
        refused_address = a.ToString();
      }
      continue;
    }
    tried = true;
    entry_.address = a.ToString();
    if ((connect_error = Dial(a)).ok()) {
      entry_.verdict = "allowed";
      dialled_ = a;
      return true;
    }
  }
  if (!tried) {
    entry_.address = refused_address;
    Refuse(403, network::VerdictName(refusal), RefusalText(refusal, entry_.host, refused_address));
  } else {
    Refuse(502, "connect-failed",
           "kiln: cannot connect to " + entry_.host + " port " + std::to_string(entry_.port) +
               ": " + connect_error.message());
  }
  return false;
}

Status Tunnel::Dial(const Address& checked) {
  auto fail = [](std::string why) { return Status(Code::kIoError, std::move(why)); };
  const auto& redirect = gate_.service().options().dial_for_test;
  const Address a = redirect ? redirect(checked) : checked;
  sockaddr_storage sa{};
  socklen_t len = a.ToSockaddr(static_cast<uint16_t>(entry_.port), &sa);
  int fd = ::socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(std::strerror(errno));
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), len);
  if (rc < 0 && errno == EINPROGRESS) {
    // In slices, so that a cut (the sandbox stopping) need not wait for it.
    int64_t deadline = MonotonicNowMs() + gate_.service().options().connect_timeout_ms;
    pollfd p{fd, POLLOUT, 0};
    while ((rc = ::poll(&p, 1, 100)) == 0 && MonotonicNowMs() < deadline && !cut()) {
    }
    if (rc <= 0) {
      ::close(fd);
      return fail(rc == 0 && cut() ? "cut" : "timed out");
    }
    int err = 0;
    socklen_t elen = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
    rc = err == 0 ? 0 : -1;
    errno = err;
  }
  if (rc < 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    return fail(why);
  }
  int flags = 0;
  ::ioctl(fd, FIONBIO, &flags);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::lock_guard lock(mu_);
  fd_ = fd;
  return Status::Ok();
}

void Tunnel::Refuse(int status, std::string_view verdict, const std::string& text) {
  entry_.verdict = std::string(verdict);
  entry_.duration_ms = MonotonicNowMs() - start_mono_ms_;
  entry_.closed_by = "proxy";
  gate_.service().log().Add(entry_);
  metrics::Inc("kiln_egress_connections_total", {{"verdict", std::string(verdict)}});
  if (!link_.Send(ProxyAnswer(status, verdict, text), /*end=*/true)) return;
  // Let the client read the answer and hang up before the agent drops the
  // socket: closing it with unread input would reset the answer away.
  int64_t deadline = MonotonicNowMs() + 2000;
  for (std::string data;;) {
    int64_t left = deadline - MonotonicNowMs();
    bool end = false;
    if (left <= 0 || link_.Receive(&data, &end, static_cast<int>(left)) != ByteLink::Got::kData)
      return;
  }
}

void Tunnel::Recheck(const network::Matcher& matcher, const std::vector<Address>& own) {
  Address dialled;
  {
    std::lock_guard lock(mu_);
    if (!dialled_set_) return;  // still deciding: it checks the new rules itself
    dialled = dialled_;
  }
  if (matcher.Check(entry_.host, dialled, entry_.port, own, gate_.service().options().internal) !=
      Verdict::kAllowed)
    Cut("policy");
}

void Tunnel::Cut(const std::string& closed_by) {
  {
    std::lock_guard lock(mu_);
    if (!cut_by_.empty()) return;
    cut_by_ = closed_by;
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }
  link_.Cancel();
}

void Tunnel::Pump(const std::string& early_bytes) {
  int fd = fd_;
  bool ok = connect_ ? link_.Send(ConnectEstablished(), false) : SendAll(fd, upstream_head_);
  if (!connect_) bytes_out_ += static_cast<int64_t>(upstream_head_.size());
  if (ok && !early_bytes.empty()) {
    ok = SendAll(fd, early_bytes);
    bytes_out_ += static_cast<int64_t>(early_bytes.size());
  }
  if (!ok) return;
  std::atomic<bool> server_ended{false};
  // Host -> sandbox on a second thread, under the agent's window (none to
  // spare: the connection ends, kilnd goes on).
  std::thread down;
  try {
    down = std::thread([&] {
      std::string buf(64 * 1024, '\0');
      for (;;) {
        ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          server_ended = true;
          link_.Send("", /*end=*/true);
          return;
        }
        bytes_in_ += n;
        metrics::Inc("kiln_egress_bytes_total", {{"direction", "in"}}, static_cast<double>(n));
        if (!link_.Send(std::string_view(buf.data(), n), false)) return;
      }
    });
  } catch (const std::system_error&) {
    return;
  }
  // Sandbox -> host here; what the host accepted is acknowledged when the
  // next piece is asked for.
  bool client_ended = false;
  for (std::string data;;) {
    bool end = false;
    if (link_.Receive(&data, &end) != ByteLink::Got::kData) break;
    if (!data.empty()) {
      if (!SendAll(fd, data)) break;
      bytes_out_ += static_cast<int64_t>(data.size());
      metrics::Inc("kiln_egress_bytes_total", {{"direction", "out"}},
                   static_cast<double>(data.size()));
    }
    if (end && !client_ended) {
      client_ended = true;
      ::shutdown(fd, SHUT_WR);
    }
  }
  // The client side is over: end the host side too, which ends `down`.
  ::shutdown(fd, SHUT_RDWR);
  link_.Cancel();
  down.join();
  entry_.closed_by = server_ended && !client_ended ? "server" : "client";
}

}  // namespace kiln::egress
