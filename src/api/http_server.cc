#include "api/http_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
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
using tcp = net::ip::tcp;
using nlohmann::json;

namespace {

constexpr uint64_t kMaxBody = 1ull << 30;
constexpr int kIdleSeconds = 300;

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
