#include "api/http_server.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "api/beast_websocket.h"
#include "api/errors.h"
#include "api/json_body.h"
#include "api/request_target.h"
#include "common/ids.h"
#include "common/log.h"

namespace kiln::api {

namespace net = boost::asio;
namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = net::ip::tcp;
using nlohmann::json;

namespace {

// The largest body any route takes (a snapshot import: an image's layers
// with its checkpoint); each route that reads a body caps its own, and one
// that does not read it closes the connection rather than drain it.
constexpr uint64_t kMaxBody = 64ull << 30;

// The socket as Beast's SyncReadStream for a request's thread, with a
// progress deadline: a read that gets no byte for `timeout_ms` fails with
// timed_out (Asio's own blocking reads wait forever).
class TimedReader {
 public:
  using executor_type = tcp::socket::executor_type;
  TimedReader(tcp::socket& sock, int timeout_ms, bool* timed_out)
      : sock_(sock), timeout_ms_(timeout_ms), timed_out_(timed_out) {}
  executor_type get_executor() { return sock_.get_executor(); }

  template <class Buffers>
  size_t read_some(const Buffers& buffers, boost::system::error_code& ec) {
    pollfd p{sock_.native_handle(), POLLIN, 0};
    int n;
    do {
      n = ::poll(&p, 1, timeout_ms_);
    } while (n < 0 && errno == EINTR);
    if (n == 0) {
      *timed_out_ = true;
      ec = net::error::timed_out;
      return 0;
    }
    return sock_.read_some(buffers, ec);
  }
  template <class Buffers>
  size_t read_some(const Buffers& buffers) {
    boost::system::error_code ec;
    size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  tcp::socket& sock_;
  int timeout_ms_;
  bool* timed_out_;
};

// The socket as Beast's SyncWriteStream for a request's thread, with a
// progress deadline: a client that stops reading its answer holds the
// thread and the answer for at most `timeout_ms` without a byte taken,
// then the write fails with timed_out (Asio's blocking writes wait forever).
// Progress, not a rate: a write waits while the kernel's send buffer
// (megabytes on loopback) drains at the client's pace.
class TimedWriter {
 public:
  using executor_type = tcp::socket::executor_type;
  TimedWriter(tcp::socket& sock, int timeout_ms) : sock_(sock), timeout_ms_(timeout_ms) {}
  executor_type get_executor() { return sock_.get_executor(); }

  template <class Buffers>
  size_t write_some(const Buffers& buffers, boost::system::error_code& ec) {
    iovec iov[16];
    size_t n = 0, total = 0;
    for (auto it = net::buffer_sequence_begin(buffers);
         it != net::buffer_sequence_end(buffers) && n < 16; ++it) {
      net::const_buffer b(*it);
      if (b.size() == 0) continue;
      iov[n++] = {const_cast<void*>(b.data()), b.size()};
      total += b.size();
    }
    if (total == 0) return 0;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    for (;;) {
      ssize_t sent = ::sendmsg(sock_.native_handle(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (sent >= 0) return static_cast<size_t>(sent);
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        ec = boost::system::error_code(errno, boost::system::system_category());
        return 0;
      }
      pollfd p{sock_.native_handle(), POLLOUT, 0};
      int ready;
      do {
        ready = ::poll(&p, 1, timeout_ms_);
      } while (ready < 0 && errno == EINTR);
      if (ready == 0) {
        ec = net::error::timed_out;
        return 0;
      }
    }
  }
  template <class Buffers>
  size_t write_some(const Buffers& buffers) {
    boost::system::error_code ec;
    size_t n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  tcp::socket& sock_;
  int timeout_ms_;
};

// What a request's thread gets from the I/O thread: the parsed headers,
// bytes read past them, and the body read so far.
struct Arrived {
  tcp::socket& sock;
  boost::beast::flat_buffer& buf;
  http::request_parser<http::buffer_body>& parser;
  std::string& early_body;
  std::string peer;
  int body_timeout_ms;
  WebSocketLimits websocket;
};

// The connection's socket handed to a relaying handler: bytes the parser
// read past the request come first.
class BeastRawConnection : public RawConnection {
 public:
  BeastRawConnection(tcp::socket& sock, boost::beast::flat_buffer& buf, int write_timeout_ms)
      : sock_(sock), buf_(buf), writer_(sock, write_timeout_ms) {}

  Got Read(std::string* out, int timeout_ms) override {
    out->clear();
    if (buf_.size() > 0) {  // read past the request by its parser
      auto past = buf_.data();
      out->assign(static_cast<const char*>(past.data()), past.size());
      buf_.consume(buf_.size());
      return Got::kData;
    }
    pollfd p{sock_.native_handle(), POLLIN, 0};
    int n;
    do {
      n = ::poll(&p, 1, timeout_ms);
    } while (n < 0 && errno == EINTR);
    if (n == 0) return Got::kTimeout;
    char buf[64 * 1024];
    ssize_t got;
    do {
      got = ::recv(sock_.native_handle(), buf, sizeof buf, MSG_DONTWAIT);
    } while (got < 0 && errno == EINTR);
    if (got < 0 && errno == EAGAIN) return Got::kTimeout;
    if (got <= 0) return Got::kEnded;
    out->assign(buf, static_cast<size_t>(got));
    return Got::kData;
  }

  bool Write(std::string_view data) override {
    boost::system::error_code ec;
    net::write(writer_, net::buffer(data.data(), data.size()), ec);
    return !ec;
  }

  void Shutdown() override { ::shutdown(sock_.native_handle(), SHUT_RDWR); }

 private:
  tcp::socket& sock_;
  boost::beast::flat_buffer& buf_;
  TimedWriter writer_;
};

class BeastExchange : public Exchange {
 public:
  explicit BeastExchange(const Arrived& in)
      : sock_(in.sock),
        buf_(in.buf),
        parser_(in.parser),
        early_body_(in.early_body),
        peer_(in.peer),
        reader_(in.sock, in.body_timeout_ms, &body_timed_out_),
        writer_(in.sock, in.body_timeout_ms),
        body_timeout_s_(in.body_timeout_ms / 1000),
        websocket_(in.websocket) {
    const auto& req = parser_.get();
    method_ = std::string(req.method_string());
    request_id_ = "req_" + NewUuid();
    keep_alive_ = req.keep_alive();
  }

  // Decodes the target into path() and the query; throws ApiError 400 for
  // one that is not an origin-form path and query.
  void ParseTarget() {
    RequestTarget target = ParseRequestTarget(parser_.get().target());
    path_ = std::move(target.path);
    query_ = std::move(target.query);
  }

  const std::string& method() const override { return method_; }
  const std::string& path() const override { return path_; }
  const std::string& request_id() const override { return request_id_; }
  std::string peer_address() const override { return peer_; }
  std::optional<std::string> Query(const std::string& name) const override {
    for (const auto& [k, v] : query_) {
      if (k == name) return v;
    }
    return std::nullopt;
  }
  std::vector<std::string> QueryAll(const std::string& name) const override {
    std::vector<std::string> out;
    for (const auto& [k, v] : query_) {
      if (k == name) out.push_back(v);
    }
    return out;
  }
  std::string Header(const std::string& name) const override {
    auto it = parser_.get().find(name);
    return it == parser_.get().end() ? "" : std::string(it->value());
  }
  std::vector<std::pair<std::string, std::string>> Headers() const override {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& f : parser_.get()) out.emplace_back(f.name_string(), f.value());
    return out;
  }
  std::optional<uint64_t> content_length() const override {
    auto n = parser_.content_length();
    if (n) return *n;
    return std::nullopt;
  }

  bool ReadBodyChunk(std::string* out) override {
    out->clear();
    if (!early_body_.empty()) {  // read by the I/O thread before the handler ran
      out->swap(early_body_);
      return true;
    }
    while (!parser_.is_done()) {
      char chunk[64 * 1024];
      parser_.get().body().data = chunk;
      parser_.get().body().size = sizeof chunk;
      boost::system::error_code ec;
      http::read_some(reader_, buf_, parser_, ec);
      if (ec == http::error::need_buffer) ec = {};
      if (ec) {
        body_error_ = true;
        keep_alive_ = false;
        return false;
      }
      size_t got = sizeof chunk - parser_.get().body().size;
      if (got > 0) {
        out->assign(chunk, got);
        return true;
      }
    }
    return false;
  }
  bool body_error() const override { return body_error_; }

  // Read once; a later call with a smaller cap (a route's own, after the
  // idempotency layer read the body under the largest) still refuses a
  // body over it.
  json JsonBody(size_t max_bytes) override {
    if (!json_body_) json_body_ = ReadJsonBody(max_bytes);
    if (json_body_size_ > max_bytes) {
      keep_alive_ = false;
      throw ApiError(Code::kPayloadTooLarge,
                     "the JSON body is larger than " + std::to_string(max_bytes) + " bytes");
    }
    return *json_body_;
  }

  json ReadJsonBody(size_t max_bytes) {
    if (auto n = content_length(); n && *n > max_bytes) {
      keep_alive_ = false;
      throw ApiError(Code::kPayloadTooLarge,
                     "the JSON body is larger than " + std::to_string(max_bytes) + " bytes");
    }
    std::string body, chunk;
    while (ReadBodyChunk(&chunk)) {
      body += chunk;
      if (body.size() > max_bytes) {
        keep_alive_ = false;
        throw ApiError(Code::kPayloadTooLarge,
                       "the JSON body is larger than " + std::to_string(max_bytes) + " bytes");
      }
    }
    if (body_timed_out_)
      throw ApiError(Code::kRequestTimeout, "body: no byte of the request body arrived for " +
                                                std::to_string(body_timeout_s_) + " s");
    if (body_error_) throw ApiError(Code::kInvalidRequest, "body: the request body ended early");
    json_body_size_ = body.size();
    return ParseJsonBody(body);
  }

  void SendJson(int status, const json& body) override {
    if (responded_) return;
    sent_json_ = body.dump(-1, ' ', false, json::error_handler_t::replace);
    RunBeforeAnswer(status, &sent_json_);
    SendBytes(status, sent_json_, "application/json", {});
  }
  int status() const override { return status_; }
  const std::string* sent_json() const override {
    return sent_json_.empty() ? nullptr : &sent_json_;
  }

  void SendBytes(int status, std::string_view body, const std::string& content_type,
                 const std::vector<std::pair<std::string, std::string>>& headers) override {
    if (responded_) return;
    RunBeforeAnswer(status, nullptr);
    responded_ = true;
    status_ = status;
    DrainBody();
    http::response<http::string_body> res{static_cast<http::status>(status), 11};
    res.set(http::field::content_type, content_type);
    res.set("x-request-id", request_id_);
    for (const auto& [k, v] : headers) res.set(k, v);
    for (const auto& [k, v] : extra_headers) res.set(k, v);
    res.keep_alive(keep_alive_);
    res.body() = std::string(body);
    res.prepare_payload();
    boost::system::error_code ec;
    http::write(writer_, res, ec);
    if (ec) keep_alive_ = false;
  }

  bool BeginStream(int status, const std::string& content_type,
                   const std::vector<std::pair<std::string, std::string>>& headers) override {
    if (responded_) return false;
    RunBeforeAnswer(status, nullptr);
    responded_ = true;
    streaming_ = true;
    status_ = status;
    http::response<http::empty_body> res{static_cast<http::status>(status), 11};
    res.set(http::field::content_type, content_type);
    res.set("x-request-id", request_id_);
    for (const auto& [k, v] : headers) res.set(k, v);
    for (const auto& [k, v] : extra_headers) res.set(k, v);
    res.keep_alive(keep_alive_);
    res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    boost::system::error_code ec;
    http::write_header(writer_, sr, ec);
    if (ec) keep_alive_ = false;
    return !ec;
  }

  bool WriteChunk(std::string_view data) override {
    if (!keep_alive_ && stream_broken_) return false;
    if (data.empty()) return true;
    boost::system::error_code ec;
    net::write(writer_, http::make_chunk(net::buffer(data.data(), data.size())), ec);
    if (ec) {
      stream_broken_ = true;
      keep_alive_ = false;
    }
    return !ec;
  }

  void EndStream() override {
    boost::system::error_code ec;
    if (!stream_broken_) net::write(writer_, http::make_chunk_last(), ec);
    if (ec) keep_alive_ = false;
    streaming_ = false;
  }

  void AbortStream() override {
    keep_alive_ = false;
    stream_broken_ = true;
    streaming_ = false;
  }

  bool responded() const override { return responded_; }
  bool ClientGone() override {
    pollfd p{sock_.native_handle(), POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
  }
  bool keep_alive() const { return keep_alive_ && !streaming_; }

  std::unique_ptr<WebSocket> UpgradeToWebSocket() override {
    if (responded_) return nullptr;
    RunBeforeAnswer(101, nullptr);
    responded_ = true;
    status_ = 101;
    keep_alive_ = false;  // the connection is the WebSocket's from here
    boost::system::error_code ec;
    auto local = sock_.local_endpoint(ec);
    if (ec) return nullptr;
    auto ws = std::make_unique<BeastWebSocket>(websocket_);
    int fd = fcntl(sock_.native_handle(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0 || !ws->Attach(local.protocol(), fd)) return nullptr;
    if (!ws->Accept(parser_.get(), request_id_)) return nullptr;
    return ws;
  }

  std::unique_ptr<RawConnection> TakeRaw(int status) override {
    if (responded_) return nullptr;
    RunBeforeAnswer(status, nullptr);
    responded_ = true;
    status_ = status;
    keep_alive_ = false;  // the connection is the relay's from here
    return std::make_unique<BeastRawConnection>(sock_, buf_, body_timeout_s_ * 1000);
  }
  std::string raw_target() const override { return std::string(parser_.get().target()); }
  void NoteStatus(int status) override {
    if (status > 0) status_ = status;
  }

  // A body the handler did not read must be consumed before the next
  // request on this connection; a large one closes the connection instead.
  void DrainBody() {
    early_body_.clear();
    if (parser_.is_done()) return;
    auto left = parser_.content_length_remaining();
    if (!left || *left > (1 << 20)) {
      keep_alive_ = false;
      return;
    }
    std::string chunk;
    while (ReadBodyChunk(&chunk)) {
    }
  }

 private:
  tcp::socket& sock_;
  boost::beast::flat_buffer& buf_;
  http::request_parser<http::buffer_body>& parser_;
  std::string& early_body_;
  std::string peer_;
  bool body_timed_out_ = false;
  TimedReader reader_;
  TimedWriter writer_;
  int body_timeout_s_;
  WebSocketLimits websocket_;
  std::string method_, path_, request_id_;
  std::vector<std::pair<std::string, std::string>> query_;
  std::optional<json> json_body_;
  size_t json_body_size_ = 0;
  std::string sent_json_;
  bool keep_alive_ = true;
  bool responded_ = false;
  bool streaming_ = false;
  bool stream_broken_ = false;
  bool body_error_ = false;
  int status_ = 0;
};

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
    bool keep_alive = false;
    {
      BeastExchange ex(Arrived{sock_, buf_, *parser_, early_body_, peer_,
                               impl_.limits.request_timeout_s * 1000,
                               WebSocketLimits{.write_timeout_s = impl_.limits.request_timeout_s,
                                               .idle_timeout_s = impl_.limits.websocket_idle_s}});
      try {
        ex.ParseTarget();
        impl_.handler(ex);
      } catch (const ApiError& e) {
        if (!ex.responded()) ex.SendJson(e.http_status(), ErrorBody(e.status(), ex.request_id()));
      } catch (const std::exception& e) {
        LogError("handler failed", {{"requestId", ex.request_id()}, {"error", e.what()}});
        if (!ex.responded())
          ex.SendJson(500, ErrorBody(Status(Code::kInternal, "internal error"), ex.request_id()));
      }
      if (!ex.responded())
        ex.SendJson(500, ErrorBody(Status(Code::kInternal, "no answer"), ex.request_id()));
      keep_alive = ex.keep_alive();
    }
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
