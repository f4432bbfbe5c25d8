#include "api/http_server.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "api/beast_exchange.h"
#include "api/errors.h"
#include "common/ids.h"
#include "common/log.h"

namespace kiln::api {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using nlohmann::json;

namespace {

// The largest body any route takes (a snapshot import: an image's layers
// with its checkpoint); each route that reads a body caps its own, and one
// that does not read it closes the connection rather than drain it.
constexpr uint64_t kMaxBody = 64ull << 30;

// A fixed answer written by the I/O thread before it closes a connection.
std::shared_ptr<std::string> ErrorAnswer(int status, const char* reason, const std::string& code,
                                         const std::string& message) {
  std::string body =
      json{{"error", {{"code", code}, {"status", status}, {"message", message}}}}.dump(
          -1, ' ', false, json::error_handler_t::replace);
  return std::make_shared<std::string>("HTTP/1.1 " + std::to_string(status) + " " + reason +
                                       "\r\nContent-Type: application/json\r\n"
                                       "x-request-id: req_" +
                                       NewUuid() + "\r\nConnection: close\r\nContent-Length: " +
                                       std::to_string(body.size()) + "\r\n\r\n" + body);
}

}  // namespace

struct HttpServer::Impl {
  class Conn;

  std::string listen;
  Handler handler;
  ServerLimits limits;
  std::mutex mu;  // guards the acceptor's closing, conns and draining
  std::condition_variable idle;
  // Every open connection by descriptor, so Drain can end the idle ones.
  std::map<int, std::weak_ptr<Conn>> conns;
  bool draining = false;
  std::atomic<bool> stopped{false};
  std::atomic<int> connections{0};
  std::map<std::string, int> per_address;  // open connections by peer address (guarded by mu)
  std::atomic<int> active{0};              // requests running on their threads
  // Declared after what Conns touch: a Conn still queued in the I/O
  // context when it is destroyed untracks itself.
  net::io_context ioc;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::thread io_thread;

  ~Impl() {
    work.reset();
    ioc.stop();
    if (io_thread.joinable()) io_thread.join();
  }

  void StartIoThread() {
    if (io_thread.joinable()) return;
    work.emplace(ioc.get_executor());
    io_thread = std::thread([this] {
      for (;;) {
        try {
          ioc.run();
          return;
        } catch (const std::exception& e) {
          LogError("HTTP I/O thread failed", {{"error", e.what()}});
        }
      }
    });
  }

  // A connection already counted (connections, per_address) by Run.
  void Start(tcp::socket sock, std::string peer);

  // A request's thread is done with it (and with its Conn).
  void Finished() {
    std::lock_guard lock(mu);
    --active;
    idle.notify_all();
  }
};

// One client connection. Between requests it belongs to the I/O thread,
// which waits for the next request, reads its headers and the start of
// its body under a deadline; then to a thread of its own that runs the
// handler and hands it back (keep-alive) or closes it. Never both at once.
class HttpServer::Impl::Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(Impl& impl, tcp::socket sock, std::string peer)
      : impl_(impl),
        sock_(std::move(sock)),
        timer_(impl.ioc),
        fd_(sock_.native_handle()),
        peer_(std::move(peer)) {}
  ~Conn() { Close(); }

  int fd() const { return fd_; }

  // I/O thread: waits for the next request (the first one on a new
  // connection within the request timeout, later ones within the idle
  // timeout), then reads it.
  void WaitRequest(bool first) {
    parser_.emplace();
    parser_->body_limit(kMaxBody);
    parser_->header_limit(64 * 1024);
    early_body_.clear();
    if (buf_.size() > 0) return ReadHeader();  // pipelined: it is here
    Arm(first ? impl_.limits.request_timeout_s : impl_.limits.idle_timeout_s, /*answer=*/false);
    sock_.async_wait(tcp::socket::wait_read,
                     [self = shared_from_this(), gen = gen_](boost::system::error_code ec) {
                       if (gen != self->gen_) return;  // the deadline passed and closed it
                       if (ec) return self->Close();
                       self->ReadHeader();
                     });
  }

 private:
  static constexpr size_t kEarlyBody = 64 * 1024;

  // Starts a deadline `seconds` away for the phase now starting. When it
  // passes, the phase's pending read is cancelled and the connection ends
  // (with a 408 if `answer`: a request was under way).
  void Arm(int seconds, bool answer) {
    ++gen_;
    timer_.expires_after(std::chrono::seconds(seconds));
    timer_.async_wait([self = shared_from_this(), gen = gen_,
                       answer](boost::system::error_code ec) {
      if (ec || gen != self->gen_) return;
      ++self->gen_;  // the pending read's handler finds it stale
      boost::system::error_code ignored;
      self->sock_.cancel(ignored);
      if (!answer) return self->Close();
      self->Refuse(ErrorAnswer(408, "Request Timeout", "request_timeout",
                               "the request did not arrive within " +
                                   std::to_string(self->impl_.limits.request_timeout_s) + " s"));
    });
  }

  void Disarm() {
    ++gen_;
    timer_.cancel();
  }

  void ReadHeader() {
    Arm(impl_.limits.request_timeout_s, /*answer=*/true);
    http::async_read_header(
        sock_, buf_, *parser_,
        [self = shared_from_this(), gen = gen_](boost::system::error_code ec, size_t) {
          if (gen != self->gen_) return;
          if (ec) return self->HeaderFailed(ec);
          self->ReadEarlyBody();
        });
  }

  void HeaderFailed(boost::system::error_code ec) {
    Disarm();
    // The client left (or the socket failed): nobody to answer.
    if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
        ec.category() != http::make_error_code(http::error::bad_target).category())
      return Close();
    // A request we cannot parse: answer 400 and close.
    Refuse(ErrorAnswer(400, "Bad Request", "invalid_request",
                       "malformed HTTP request: " + ec.message()));
  }

  // Reads the body's first kEarlyBody bytes (all of a JSON body) under the
  // same deadline as the headers, so a client that dribbles its body does
  // not hold a thread either.
  void ReadEarlyBody() {
    if (parser_->is_done() || early_body_.size() >= kEarlyBody) return Dispatch();
    parser_->get().body().data = chunk_;
    parser_->get().body().size = sizeof chunk_;
    http::async_read_some(
        sock_, buf_, *parser_,
        [self = shared_from_this(), gen = gen_](boost::system::error_code ec, size_t) {
          if (gen != self->gen_) return;
          if (ec == http::error::need_buffer) ec = {};
          if (ec) return self->HeaderFailed(ec);
          self->early_body_.append(self->chunk_,
                                   sizeof self->chunk_ - self->parser_->get().body().size);
          self->ReadEarlyBody();
        });
  }

  // Hands the connection to a thread of its own for the handler.
  void Dispatch() {
    Disarm();
    ++impl_.active;
    try {
      std::thread([self = shared_from_this()]() mutable {
        Impl& impl = self->impl_;
        self->Serve();
        // This thread's reference goes before the request stops counting:
        // once none count, Drain returns and the server (its I/O context,
        // which the Conn's timer belongs to) may be destroyed.
        self.reset();
        impl.Finished();
      }).detach();
    } catch (const std::system_error& e) {
      impl_.Finished();
      LogError("cannot start a request thread", {{"error", e.what()}});
      Refuse(ErrorAnswer(503, "Service Unavailable", "server_busy", "cannot start a thread"));
    }
  }

  // The request's own thread.
  void Serve() {
    bool keep_alive = ServeRequest(
        Arrived{sock_, buf_, *parser_, early_body_, peer_, impl_.limits.request_timeout_s * 1000,
                WebSocketLimits{.write_timeout_s = impl_.limits.request_timeout_s,
                                .idle_timeout_s = impl_.limits.websocket_idle_s}},
        impl_.handler);
    {
      std::lock_guard lock(impl_.mu);
      if (impl_.draining) keep_alive = false;
    }
    if (keep_alive) {
      net::post(impl_.ioc, [self = shared_from_this()] { self->WaitRequest(false); });
    } else {
      Close();
    }
  }

  // Writes a fixed answer (the I/O thread), then closes. The write and
  // what follows get 5 s in all: a client that reads nothing may not hold
  // the connection open through it.
  void Refuse(std::shared_ptr<std::string> answer) {
    ++gen_;
    timer_.expires_after(std::chrono::seconds(5));
    timer_.async_wait([self = shared_from_this(), gen = gen_](boost::system::error_code ec) {
      if (!ec && gen == self->gen_) self->Close();
    });
    net::async_write(sock_, net::buffer(*answer),
                     [self = shared_from_this(), answer](boost::system::error_code ec, size_t) {
                       if (ec) return self->Close();
                       // Closing with unread bytes from the client would send
                       // a reset, which may discard the answer before the
                       // client reads it: end our side, then read and drop
                       // what comes until the client closes (lingering close).
                       boost::system::error_code ignored;
                       self->sock_.shutdown(tcp::socket::shutdown_send, ignored);
                       self->Linger();
                     });
  }

  void Linger() {
    sock_.async_read_some(net::buffer(chunk_),
                          [self = shared_from_this()](boost::system::error_code ec, size_t) {
                            if (ec) return self->Close();
                            self->Linger();
                          });
  }

  // Ends the connection (idempotent): FIN to the client, the descriptor
  // closed, and it no longer counts.
  void Close() {
    if (closed_.exchange(true)) return;
    {
      // Untracked before the descriptor is closed: until then no new
      // connection can get its number.
      std::lock_guard lock(impl_.mu);
      impl_.conns.erase(fd_);
      --impl_.connections;
      if (auto it = impl_.per_address.find(peer_);
          it != impl_.per_address.end() && --it->second <= 0)
        impl_.per_address.erase(it);
      impl_.idle.notify_all();
    }
    boost::system::error_code ec;
    sock_.shutdown(tcp::socket::shutdown_both, ec);
    sock_.close(ec);
  }

  Impl& impl_;
  tcp::socket sock_;
  net::steady_timer timer_;
  const int fd_;
  std::string peer_;
  boost::beast::flat_buffer buf_;
  std::optional<http::request_parser<http::buffer_body>> parser_;
  std::string early_body_;
  char chunk_[16 * 1024];
  uint64_t gen_ = 0;  // the I/O thread's: which phase a handler belongs to
  std::atomic<bool> closed_{false};
};

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
