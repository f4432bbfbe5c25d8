#include "api/http_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

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

constexpr uint64_t kMaxBody = 1ull << 30;
constexpr int kIdleSeconds = 300;

// Beast's websocket stream, driven asynchronously by an io_context of its
// own that Run turns on the connection's thread: other threads only post
// to it, so the stream is only ever touched by one thread.
class BeastWebSocket : public WebSocket {
 public:
  // Takes a duplicate of the connection's descriptor: the HTTP side keeps
  // its own (kilnd's drain still ends this connection by shutting it down).
  bool Attach(const tcp& protocol, int fd) {
    boost::system::error_code ec;
    ws_.next_layer().assign(protocol, fd, ec);
    if (ec) ::close(fd);
    return !ec;
  }

  template <class Request>
  bool Accept(const Request& req, const std::string& request_id) {
    ws_.set_option(websocket::stream_base::decorator(
        [request_id](websocket::response_type& res) { res.set("x-request-id", request_id); }));
    // No idle timeout: a terminal may sit unused for hours. The close
    // handshake and the opening one still time out.
    websocket::stream_base::timeout timeouts{};
    timeouts.handshake_timeout = std::chrono::seconds(30);
    timeouts.idle_timeout = websocket::stream_base::none();
    timeouts.keep_alive_pings = false;
    ws_.set_option(timeouts);
    ws_.read_message_max(1 << 20);
    boost::system::error_code ec;
    ws_.accept(req, ec);
    return !ec;
  }

  void Run(const std::function<void(std::string_view, bool)>& on_message) override {
    on_message_ = &on_message;
    Read();
    ioc_.run();
    std::lock_guard lock(mu_);
    open_ = false;
    room_.notify_all();
  }

  bool Send(std::string data, bool binary) override {
    std::unique_lock lock(mu_);
    // The io thread itself (a reply from on_message) must not wait: only
    // it makes room. So the 1 MiB bound holds for other threads only.
    if (!ioc_.get_executor().running_in_this_thread())
      room_.wait(lock, [this] { return !open_ || queued_ < kMaxQueued; });
    if (!open_) return false;
    queued_ += data.size();
    lock.unlock();
    net::post(ioc_, [this, data = std::move(data), binary]() mutable {
      queue_.push_back(Out{std::move(data), binary, std::nullopt});
      Write();
    });
    return true;
  }

  void Close(uint16_t code, const std::string& reason) override {
    net::post(ioc_, [this, code, reason] {
      queue_.push_back(Out{
          "", false, websocket::close_reason(static_cast<websocket::close_code>(code), reason)});
      Write();
    });
  }

 private:
  static constexpr size_t kMaxQueued = 1 << 20;
  struct Out {
    std::string data;
    bool binary;
    std::optional<websocket::close_reason> close;  // a close frame instead of a message
  };

  void Read() {
    ws_.async_read(in_, [this](boost::system::error_code ec, size_t) {
      if (ec) return Ended();
      std::string data = boost::beast::buffers_to_string(in_.data());
      in_.consume(in_.size());
      (*on_message_)(data, ws_.got_binary());
      Read();
    });
  }

  // One write at a time (Beast's rule); the next starts from its handler.
  void Write() {
    if (writing_ || queue_.empty() || closing_) return;
    writing_ = true;
    Out& out = queue_.front();
    if (out.close) {
      closing_ = true;
      ws_.async_close(*out.close, [this](boost::system::error_code) { writing_ = false; });
      return;
    }
    ws_.binary(out.binary);
    ws_.async_write(net::buffer(out.data), [this](boost::system::error_code ec, size_t n) {
      writing_ = false;
      queue_.pop_front();
      {
        std::lock_guard lock(mu_);
        queued_ -= n <= queued_ ? n : queued_;
        room_.notify_all();
      }
      if (ec) return Ended();
      Write();
    });
  }

  // The peer is gone or closed: nothing more will be read or written.
  void Ended() {
    std::lock_guard lock(mu_);
    open_ = false;
    room_.notify_all();
    boost::system::error_code ec;
    ws_.next_layer().cancel(ec);
  }

  net::io_context ioc_;
  websocket::stream<tcp::socket> ws_{ioc_};
  boost::beast::flat_buffer in_;
  const std::function<void(std::string_view, bool)>* on_message_ = nullptr;
  std::deque<Out> queue_;  // the io thread's only
  bool writing_ = false;
  bool closing_ = false;
  std::mutex mu_;  // guards open_ and queued_, shared with senders
  std::condition_variable room_;
  bool open_ = true;
  size_t queued_ = 0;
};

class BeastExchange : public Exchange {
 public:
  BeastExchange(tcp::socket& sock, boost::beast::flat_buffer& buf,
                http::request_parser<http::buffer_body>& parser)
      : sock_(sock), buf_(buf), parser_(parser) {
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
  std::optional<uint64_t> content_length() const override {
    auto n = parser_.content_length();
    if (n) return *n;
    return std::nullopt;
  }

  bool ReadBodyChunk(std::string* out) override {
    out->clear();
    while (!parser_.is_done()) {
      char chunk[64 * 1024];
      parser_.get().body().data = chunk;
      parser_.get().body().size = sizeof chunk;
      boost::system::error_code ec;
      http::read_some(sock_, buf_, parser_, ec);
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

  json JsonBody(size_t max_bytes) override {
    if (!json_body_) json_body_ = ReadJsonBody(max_bytes);
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
    if (body_error_) throw ApiError(Code::kInvalidRequest, "body: the request body ended early");
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
    http::write(sock_, res, ec);
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
    http::write_header(sock_, sr, ec);
    if (ec) keep_alive_ = false;
    return !ec;
  }

  bool WriteChunk(std::string_view data) override {
    if (!keep_alive_ && stream_broken_) return false;
    if (data.empty()) return true;
    boost::system::error_code ec;
    net::write(sock_, http::make_chunk(net::buffer(data.data(), data.size())), ec);
    if (ec) {
      stream_broken_ = true;
      keep_alive_ = false;
    }
    return !ec;
  }

  void EndStream() override {
    boost::system::error_code ec;
    if (!stream_broken_) net::write(sock_, http::make_chunk_last(), ec);
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
    auto ws = std::make_unique<BeastWebSocket>();
    int fd = fcntl(sock_.native_handle(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0 || !ws->Attach(local.protocol(), fd)) return nullptr;
    if (!ws->Accept(parser_.get(), request_id_)) return nullptr;
    return ws;
  }

  // A body the handler did not read must be consumed before the next
  // request on this connection; a large one closes the connection instead.
  void DrainBody() {
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
  std::string method_, path_, request_id_;
  std::vector<std::pair<std::string, std::string>> query_;
  std::optional<json> json_body_;
  std::string sent_json_;
  bool keep_alive_ = true;
  bool responded_ = false;
  bool streaming_ = false;
  bool stream_broken_ = false;
  bool body_error_ = false;
  int status_ = 0;
};

}  // namespace

// Each connection has a thread; this many at once at most (a queue of
// 10,000 waiting creates fits).
constexpr int kMaxConnections = 16384;

struct HttpServer::Impl {
  std::string listen;
  Handler handler;
  net::io_context ioc;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::atomic<bool> stopped{false};
  std::atomic<int> connections{0};
  std::mutex mu;  // guards the acceptor's closing and open_fds
  std::condition_variable idle;
  std::set<int> open_fds;  // client sockets, so Drain can end idle keep-alives

  void Track(int fd) {
    std::lock_guard lock(mu);
    open_fds.insert(fd);
  }
  void Untrack(int fd) {
    std::lock_guard lock(mu);
    open_fds.erase(fd);
    --connections;
    idle.notify_all();
  }

  void Serve(tcp::socket sock) {
    timeval tv{kIdleSeconds, 0};
    setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(sock.native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    boost::beast::flat_buffer buf;
    for (;;) {
      http::request_parser<http::buffer_body> parser;
      parser.body_limit(kMaxBody);
      parser.header_limit(64 * 1024);
      boost::system::error_code ec;
      http::read_header(sock, buf, parser, ec);
      if (ec) {
        if (ec != http::error::end_of_stream && ec != net::error::eof &&
            ec != net::error::connection_reset && ec != net::error::would_block &&
            ec != net::error::timed_out) {
          // A request we cannot parse: answer 400 and close.
          http::response<http::string_body> res{http::status::bad_request, 11};
          res.set(http::field::content_type, "application/json");
          res.body() = json{{"error",
                             {{"code", "invalid_request"},
                              {"status", 400},
                              {"message", "malformed HTTP request: " + ec.message()}}}}
                           .dump();
          res.keep_alive(false);
          res.prepare_payload();
          boost::system::error_code wec;
          http::write(sock, res, wec);
        }
        break;
      }
      BeastExchange ex(sock, buf, parser);
      try {
        ex.ParseTarget();
        handler(ex);
      } catch (const ApiError& e) {
        if (!ex.responded()) ex.SendJson(e.http_status(), ErrorBody(e.status(), ex.request_id()));
      } catch (const std::exception& e) {
        LogError("handler failed", {{"requestId", ex.request_id()}, {"error", e.what()}});
        if (!ex.responded())
          ex.SendJson(500, ErrorBody(Status(Code::kInternal, "internal error"), ex.request_id()));
      }
      if (!ex.responded())
        ex.SendJson(500, ErrorBody(Status(Code::kInternal, "no answer"), ex.request_id()));
      if (!ex.keep_alive()) break;
    }
    boost::system::error_code ec;
    sock.shutdown(tcp::socket::shutdown_both, ec);
  }
};

HttpServer::HttpServer(const std::string& listen, Handler handler)
    : impl_(std::make_unique<Impl>()) {
  impl_->listen = listen;
  impl_->handler = std::move(handler);
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
    if (impl_->connections.load() >= kMaxConnections) {
      // Past the cap a new connection gets a plain refusal, not a thread.
      static const char kBusy[] =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
          "Retry-After: 1\r\nx-request-id: req_refused\r\nConnection: close\r\n"
          "Content-Length: 83\r\n\r\n"
          "{\"error\":{\"code\":\"server_busy\",\"status\":503,\"message\":\"too many open "
          "connections\"}}";
      net::write(sock, net::buffer(kBusy, sizeof(kBusy) - 1), ec);
      continue;
    }
    int fd = sock.native_handle();
    try {
      ++impl_->connections;
      impl_->Track(fd);
      std::thread([impl = impl_.get(), s = std::move(sock), fd]() mutable {
        impl->Serve(std::move(s));
        impl->Untrack(fd);
      }).detach();
    } catch (const std::system_error& e) {
      impl_->Untrack(fd);
      LogError("cannot start a connection thread", {{"error", e.what()}});
    }
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
  // Ends connections waiting for their next request; a request being
  // handled still gets to write its answer.
  for (int fd : impl_->open_fds) ::shutdown(fd, SHUT_RD);
  return impl_->idle.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                              [this] { return impl_->connections.load() == 0; });
}

}  // namespace kiln::api
