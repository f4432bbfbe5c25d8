#include "agent/egress.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "agent/relay.h"
#include "proto/frame.h"
#include "proto/ops.h"

namespace kiln::agent {

const char* const kEgressEnv[5] = {
    "HTTP_PROXY=http://127.0.0.1:10800", "HTTPS_PROXY=http://127.0.0.1:10800",
    "http_proxy=http://127.0.0.1:10800", "https_proxy=http://127.0.0.1:10800",
    "NO_PROXY=localhost,127.0.0.1,::1"};

namespace {

// A connection nobody attached: kilnd is not listening (it is restarting) or
// did not answer. A plain answer beats a hang.
constexpr char kUnavailable[] =
    "HTTP/1.1 503 Service Unavailable\r\nX-Kiln-Egress: unavailable\r\nContent-Length: 0\r\n"
    "Connection: close\r\n\r\n";
constexpr int64_t kAttachTimeoutMs = 10000;

void RefuseUnattached(int fd) {
  [[maybe_unused]] ssize_t n = ::send(fd, kUnavailable, sizeof kUnavailable - 1, MSG_NOSIGNAL);
}

}  // namespace

// Holds the daemon's listen stream; ending it (cancel, new session) stops
// the announcements.
class EgressListenStream : public Stream {
 public:
  EgressListenStream(Egress& egress, uint32_t stream) : egress_(egress), stream_(stream) {}
  ~EgressListenStream() override {
    if (egress_.listen_stream_ == stream_) egress_.listen_stream_ = 0;
  }

 private:
  Egress& egress_;
  uint32_t stream_;
};

Egress::Egress(Agent& agent) : agent_(agent) {}

Egress::~Egress() {
  if (listener_) agent_.loop().Remove(listener_.get());
  for (auto& [id, p] : pending_) agent_.loop().CancelTimer(p.timer);
}

void Egress::Listen() {
  listener_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int one = 1;
  setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(kEgressPort);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!listener_ || ::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0 ||
      ::listen(listener_.get(), 512) < 0) {
    std::fprintf(stderr, "kiln-agent: cannot listen on 127.0.0.1:%u: %s\n", kEgressPort,
                 std::strerror(errno));
    listener_.reset();
    return;
  }
  agent_.loop().Add(listener_.get(), EPOLLIN, [this](uint32_t) { OnAccept(); });
}

void Egress::OnAccept() {
  for (;;) {
    UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) return;  // EAGAIN, or a transient error (EMFILE) retried on the next wakeup
    if (listen_stream_ == 0) {
      RefuseUnattached(fd.get());
      continue;
    }
    uint64_t id = next_conn_++;
    EventLoop::TimerId timer = agent_.loop().AddTimer(kAttachTimeoutMs, [this, id] {
      auto it = pending_.find(id);
      if (it == pending_.end()) return;
      RefuseUnattached(it->second.fd.get());
      pending_.erase(it);
    });
    pending_[id] = Pending{std::move(fd), timer};
    agent_.channel().SendEvent(listen_stream_, proto::EgressConn{.conn = id});
  }
}

void Egress::OnNewSession() {
  for (auto& [id, p] : pending_) {
    agent_.loop().CancelTimer(p.timer);
    RefuseUnattached(p.fd.get());
  }
  pending_.clear();
}

void Egress::HandleListen(uint32_t stream) {
  // A newer listener replaces an older one of the same session.
  listen_stream_ = stream;
  agent_.Attach(stream, std::make_unique<EgressListenStream>(*this, stream));
}

void Egress::HandleAttach(uint32_t stream, uint64_t conn) {
  auto it = pending_.find(conn);
  if (it == pending_.end()) {
    return agent_.channel().SendError(stream, "not_found",
                                      "no pending connection " + std::to_string(conn));
  }
  agent_.loop().CancelTimer(it->second.timer);
  UniqueFd fd = std::move(it->second.fd);
  pending_.erase(it);
  agent_.Attach(stream, std::make_unique<RelayStream>(agent_, stream, std::move(fd)));
}

}  // namespace kiln::agent
