#include "agent/egress.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

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
constexpr size_t kEgressReadChunk = 64 * 1024;
// Credit the daemon for bytes written to the client in batches, not per write.
constexpr size_t kCreditBatch = 64 * 1024;

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

// One proxied connection: the client's socket inside the sandbox and the
// daemon's stream for it.
class EgressConnStream : public Stream {
 public:
  EgressConnStream(Agent& agent, uint32_t stream, UniqueFd fd)
      : agent_(agent), stream_(stream), fd_(std::move(fd)) {
    agent_.loop().Add(fd_.get(), EPOLLIN, [this](uint32_t ev) { OnEvents(ev); });
  }
  ~EgressConnStream() override {
    if (flush_timer_) agent_.loop().CancelTimer(flush_timer_);
    agent_.loop().Remove(fd_.get());
  }

  // Bytes from the host for the client.
  void OnData(uint8_t channel, std::string data, bool end) override {
    if (channel != proto::kStdin || done_) return;
    out_ += data;
    if (end) peer_ended_ = true;
    // The daemon's frames are small (PIPE_BUF) and one read of the channel
    // holds many: write them to the client in one go after the batch.
    if (!flush_timer_) {
      flush_timer_ = agent_.loop().AddTimer(0, [this] {
        flush_timer_ = 0;
        Flush();
      });
    }
  }

  // The daemon consumed `bytes` of what we sent.
  void OnWindow(uint32_t bytes) override {
    unacked_ = bytes > unacked_ ? 0 : unacked_ - bytes;
    UpdateInterest();
  }

 private:
  void OnEvents(uint32_t ev) {
    if (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)) Flush();
    if (!done_ && (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))) Read();
  }

  void Read() {
    if (read_ended_ || unacked_ >= proto::kStreamWindow) return;
    char buf[kEgressReadChunk];
    ssize_t n = ::recv(fd_.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      // EOF or reset: the host side sees the end of the client's bytes.
      read_ended_ = true;
      agent_.channel().SendData(stream_, proto::kStdout, "", /*end=*/true);
      if (n < 0) return End("reset");
      UpdateInterest();
      MaybeEnd();
      return;
    }
    agent_.channel().SendData(stream_, proto::kStdout, std::string_view(buf, n));
    unacked_ += static_cast<uint64_t>(n);
    UpdateInterest();
  }

  void Flush() {
    while (offset_ < out_.size()) {
      ssize_t n = ::send(fd_.get(), out_.data() + offset_, out_.size() - offset_,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n <= 0) return End("reset");  // the client is gone
      offset_ += static_cast<size_t>(n);
      uncredited_ += static_cast<size_t>(n);
    }
    if (offset_ == out_.size()) {
      out_.clear();
      offset_ = 0;
    }
    if (uncredited_ >= kCreditBatch || (out_.empty() && uncredited_ > 0)) {
      agent_.channel().SendWindow(stream_, static_cast<uint32_t>(uncredited_));
      uncredited_ = 0;
    }
    if (out_.empty() && peer_ended_ && !write_shut_) {
      write_shut_ = true;
      ::shutdown(fd_.get(), SHUT_WR);
    }
    UpdateInterest();
    MaybeEnd();
  }

  void UpdateInterest() {
    if (done_) return;
    uint32_t ev = 0;
    if (!read_ended_ && unacked_ < proto::kStreamWindow) ev |= EPOLLIN;
    if (!out_.empty()) ev |= EPOLLOUT;
    if (ev != interest_) {
      interest_ = ev;
      agent_.loop().Modify(fd_.get(), ev);
    }
  }

  void MaybeEnd() {
    if (read_ended_ && write_shut_) End("closed");
  }

  void End(const char* how) {
    if (done_) return;
    done_ = true;
    agent_.channel().SendResponse(stream_, proto::EgressClosed{.closed = how});
    agent_.Finish(stream_);
  }

  Agent& agent_;
  uint32_t stream_;
  UniqueFd fd_;
  std::string out_;
  size_t offset_ = 0;
  size_t uncredited_ = 0;
  uint64_t unacked_ = 0;
  uint32_t interest_ = EPOLLIN;
  EventLoop::TimerId flush_timer_ = 0;
  bool read_ended_ = false, peer_ended_ = false, write_shut_ = false, done_ = false;
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
  agent_.Attach(stream, std::make_unique<EgressConnStream>(agent_, stream, std::move(fd)));
}

}  // namespace kiln::agent
