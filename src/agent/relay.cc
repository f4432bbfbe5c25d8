#include "agent/relay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "proto/frame.h"
#include "proto/ops.h"

namespace kiln::agent {

namespace {

constexpr size_t kRelayReadChunk = 64 * 1024;
// Credit the daemon for bytes written to the socket in batches, not per write.
constexpr size_t kRelayCreditBatch = 64 * 1024;
// A server that neither accepts nor refuses (a full backlog) is given up on.
constexpr int64_t kRelayConnectTimeoutMs = 10000;

}  // namespace

RelayStream::RelayStream(Agent& agent, uint32_t stream, UniqueFd fd, bool connecting)
    : agent_(agent), stream_(stream), fd_(std::move(fd)), connecting_(connecting) {
  interest_ = connecting_ ? EPOLLOUT : EPOLLIN;
  agent_.loop().Add(fd_.get(), interest_, [this](uint32_t ev) { OnEvents(ev); });
  if (connecting_) {
    connect_timer_ = agent_.loop().AddTimer(kRelayConnectTimeoutMs, [this] {
      connect_timer_ = 0;
      if (!connecting_ || done_) return;
      done_ = true;
      agent_.channel().SendError(stream_, "port_closed", "the connection was not accepted in time");
      agent_.Finish(stream_);
    });
  }
}

RelayStream::~RelayStream() {
  if (flush_timer_) agent_.loop().CancelTimer(flush_timer_);
  if (connect_timer_) agent_.loop().CancelTimer(connect_timer_);
  agent_.loop().Remove(fd_.get());
}

void RelayStream::OnData(uint8_t channel, std::string data, bool end) {
  if (channel != proto::kStdin || done_) return;
  out_ += data;
  if (end) peer_ended_ = true;
  if (connecting_) return;  // written once connected
  // The daemon's frames are small (PIPE_BUF) and one read of the channel
  // holds many: write them to the socket in one go after the batch.
  if (!flush_timer_) {
    flush_timer_ = agent_.loop().AddTimer(0, [this] {
      flush_timer_ = 0;
      Flush();
    });
  }
}

void RelayStream::OnWindow(uint32_t bytes) {
  unacked_ = bytes > unacked_ ? 0 : unacked_ - bytes;
  UpdateInterest();
}

void RelayStream::OnEvents(uint32_t ev) {
  if (done_) return;
  if (connecting_) return Connected();
  if (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)) Flush();
  if (!done_ && (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))) Read();
}

void RelayStream::Connected() {
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
  if (err == EINPROGRESS) return;
  connecting_ = false;
  if (connect_timer_) {
    agent_.loop().CancelTimer(connect_timer_);
    connect_timer_ = 0;
  }
  if (err != 0) {
    done_ = true;
    agent_.channel().SendError(stream_, "port_closed", std::strerror(err));
    return agent_.Finish(stream_);
  }
  agent_.channel().SendEvent(stream_, proto::PortOpened{});
  interest_ = 0;
  Flush();  // what kilnd sent meanwhile; also sets the interest
}

void RelayStream::Read() {
  if (read_ended_ || unacked_ >= proto::kStreamWindow) return;
  char buf[kRelayReadChunk];
  ssize_t n = ::recv(fd_.get(), buf, sizeof buf, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    // EOF or reset: the host side sees the end of the socket's bytes.
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

void RelayStream::Flush() {
  while (offset_ < out_.size()) {
    ssize_t n = ::send(fd_.get(), out_.data() + offset_, out_.size() - offset_,
                       MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) return End("reset");  // the peer is gone
    offset_ += static_cast<size_t>(n);
    uncredited_ += static_cast<size_t>(n);
  }
  if (offset_ == out_.size()) {
    out_.clear();
    offset_ = 0;
  }
  if (uncredited_ >= kRelayCreditBatch || (out_.empty() && uncredited_ > 0)) {
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

void RelayStream::UpdateInterest() {
  if (done_ || connecting_) return;
  uint32_t ev = 0;
  if (!read_ended_ && unacked_ < proto::kStreamWindow) ev |= EPOLLIN;
  if (!out_.empty()) ev |= EPOLLOUT;
  if (ev != interest_) {
    interest_ = ev;
    agent_.loop().Modify(fd_.get(), ev);
  }
}

void RelayStream::MaybeEnd() {
  if (read_ended_ && write_shut_) End("closed");
}

void RelayStream::End(const char* how) {
  if (done_) return;
  done_ = true;
  agent_.channel().SendResponse(stream_, proto::EgressClosed{.closed = how});
  agent_.Finish(stream_);
}

namespace {

// Starts a non-blocking connect to loopback; the socket, or -1 with errno.
int StartConnect(int port, bool v6) {
  int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int rc;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    a.sin6_addr = in6addr_loopback;
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc == 0 || errno == EINPROGRESS) return fd;
  int saved = errno;
  ::close(fd);
  errno = saved;
  return -1;
}

}  // namespace

void DialPort(Agent& agent, uint32_t stream, int port) {
  if (port < 1 || port > 65535)
    return agent.channel().SendError(stream, "invalid_request", "port must be 1 to 65535");
  // Loopback refuses at once in the connect call; a server bound to [::1]
  // only is tried next.
  int fd = StartConnect(port, false);
  if (fd < 0 && errno == ECONNREFUSED) fd = StartConnect(port, true);
  if (fd < 0) {
    std::string why = errno == ECONNREFUSED || errno == EADDRNOTAVAIL
                          ? "nothing listens on port " + std::to_string(port)
                          : std::string(std::strerror(errno));
    return agent.channel().SendError(stream, "port_closed", why);
  }
  agent.Attach(stream, std::make_unique<RelayStream>(agent, stream, UniqueFd(fd), true));
}

}  // namespace kiln::agent
