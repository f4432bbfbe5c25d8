// The HTTP server: the listener, the accept loop (connection caps), drain
// and stop. A connection's life is http_connection.cc's.
#include "api/http_server.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "api/errors.h"
#include "api/http_server_impl.h"
#include "common/log.h"

namespace kiln::api {

using nlohmann::json;

void HttpServer::Impl::Start(tcp::socket sock, std::string peer) {
  int one = 1;
  setsockopt(sock.native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto conn = std::make_shared<Conn>(*this, std::move(sock), std::move(peer));
  {
    std::lock_guard lock(mu);
    conns[conn->fd()] = conn;
  }
  net::post(ioc, [conn] { conn->WaitRequest(true); });
}

HttpServer::HttpServer(const std::string& listen, Handler handler, ServerLimits limits)
    : impl_(std::make_unique<Impl>()) {
  impl_->listen = listen;
  impl_->handler = std::move(handler);
  impl_->limits = limits;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Listen() {
  size_t colon = impl_->listen.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("--listen must be host:port");
  std::string host = impl_->listen.substr(0, colon);
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  int port = std::stoi(impl_->listen.substr(colon + 1));
  tcp::endpoint ep(net::ip::make_address(host), static_cast<unsigned short>(port));
  impl_->acceptor = std::make_unique<tcp::acceptor>(impl_->ioc);
  impl_->acceptor->open(ep.protocol());
  impl_->acceptor->set_option(net::socket_base::reuse_address(true));
  impl_->acceptor->bind(ep);
  impl_->acceptor->listen(1024);
}

void HttpServer::Run() {
  if (!impl_->acceptor) Listen();
  impl_->StartIoThread();
  std::chrono::steady_clock::time_point last_accept_error{};
  while (!impl_->stopped) {
    boost::system::error_code ec;
    tcp::socket sock(impl_->ioc);
    impl_->acceptor->accept(sock, ec);
    if (ec) {
      if (impl_->stopped) break;
      // Out of file descriptors or memory: the client waits in the backlog.
      auto now = std::chrono::steady_clock::now();
      if (now - last_accept_error > std::chrono::seconds(10)) {
        LogError("cannot accept a connection", {{"error", ec.message()}});
        last_accept_error = now;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    std::string peer;
    if (auto remote = sock.remote_endpoint(ec); !ec) peer = remote.address().to_string();
    bool admitted = false;
    {
      std::lock_guard lock(impl_->mu);
      int& mine = impl_->per_address[peer];
      if (mine < impl_->limits.max_connections_per_address &&
          impl_->connections.load() < impl_->limits.max_connections) {
        ++mine;
        ++impl_->connections;
        admitted = true;
      } else if (mine == 0) {
        impl_->per_address.erase(peer);
      }
    }
    if (!admitted) {
      // Past a cap a new connection gets a plain refusal and is closed; the
      // write cannot block (a fresh socket's buffer takes it).
      static const char kBusy[] =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
          "Retry-After: 1\r\nx-request-id: req_refused\r\nConnection: close\r\n"
          "Content-Length: 83\r\n\r\n"
          "{\"error\":{\"code\":\"server_busy\",\"status\":503,\"message\":\"too many open "
          "connections\"}}";
      ::send(sock.native_handle(), kBusy, sizeof(kBusy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
      continue;
    }
    impl_->Start(std::move(sock), std::move(peer));
  }
  std::lock_guard lock(impl_->mu);
  boost::system::error_code ec;
  impl_->acceptor->close(ec);
}

void HttpServer::Stop() {
  std::lock_guard lock(impl_->mu);
  if (impl_->stopped.exchange(true)) return;
  // Wakes the accept in Run, which closes the acceptor itself: closing it
  // here would race with Run returning and the server being destroyed.
  if (impl_->acceptor) ::shutdown(impl_->acceptor->native_handle(), SHUT_RDWR);
}

bool HttpServer::Drain(int timeout_ms) {
  std::unique_lock lock(impl_->mu);
  impl_->draining = true;
  // Ends connections waiting for their next request (their wait sees the
  // end of the stream); a request being handled still gets to write its
  // answer, and its connection is closed after it.
  for (const auto& [fd, conn] : impl_->conns) ::shutdown(fd, SHUT_RD);
  return impl_->idle.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                              [this] { return impl_->active.load() == 0; });
}

int HttpServer::connections() const { return impl_->connections.load(); }
int HttpServer::active_requests() const { return impl_->active.load(); }

}  // namespace kiln::api
