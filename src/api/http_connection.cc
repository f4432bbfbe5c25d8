// One client connection of the HTTP server (api/http_server_impl.h).
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <thread>

#include "api/beast_exchange.h"
#include "api/http_server_impl.h"
#include "common/ids.h"
#include "common/log.h"

namespace kiln::api {

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

void HttpServer::Impl::Conn::WaitRequest(bool first) {
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

void HttpServer::Impl::Conn::Arm(int seconds, bool answer) {
  ++gen_;
  timer_.expires_after(std::chrono::seconds(seconds));
  timer_.async_wait([self = shared_from_this(), gen = gen_, answer](boost::system::error_code ec) {
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

void HttpServer::Impl::Conn::Disarm() {
  ++gen_;
  timer_.cancel();
}

void HttpServer::Impl::Conn::ReadHeader() {
  Arm(impl_.limits.request_timeout_s, /*answer=*/true);
  http::async_read_header(
      sock_, buf_, *parser_,
      [self = shared_from_this(), gen = gen_](boost::system::error_code ec, size_t) {
        if (gen != self->gen_) return;
        if (ec) return self->HeaderFailed(ec);
        self->ReadEarlyBody();
      });
}

void HttpServer::Impl::Conn::HeaderFailed(boost::system::error_code ec) {
  Disarm();
  // The client left (or the socket failed): nobody to answer.
  if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
      ec.category() != http::make_error_code(http::error::bad_target).category())
    return Close();
  // A request we cannot parse: answer 400 and close.
  Refuse(ErrorAnswer(400, "Bad Request", "invalid_request",
                     "malformed HTTP request: " + ec.message()));
}

void HttpServer::Impl::Conn::ReadEarlyBody() {
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

void HttpServer::Impl::Conn::Dispatch() {
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

void HttpServer::Impl::Conn::Serve() {
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

void HttpServer::Impl::Conn::Refuse(std::shared_ptr<std::string> answer) {
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

void HttpServer::Impl::Conn::Linger() {
  sock_.async_read_some(net::buffer(chunk_),
                        [self = shared_from_this()](boost::system::error_code ec, size_t) {
                          if (ec) return self->Close();
                          self->Linger();
                        });
}

void HttpServer::Impl::Conn::Close() {
  if (closed_.exchange(true)) return;
  {
    // Untracked before the descriptor is closed: until then no new
    // connection can get its number.
    std::lock_guard lock(impl_.mu);
    impl_.conns.erase(fd_);
    --impl_.connections;
    if (auto it = impl_.per_address.find(peer_); it != impl_.per_address.end() && --it->second <= 0)
      impl_.per_address.erase(it);
    impl_.idle.notify_all();
  }
  boost::system::error_code ec;
  sock_.shutdown(tcp::socket::shutdown_both, ec);
  sock_.close(ec);
}

}  // namespace kiln::api
