#include "api/beast_exchange.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <optional>

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
      if (!WaitWritable()) {
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
  // Waits until the socket takes more bytes; false after timeout_ms without
  // the client taking any. Progress is the send queue shrinking (SIOCOUTQ),
  // checked every slice: POLLOUT alone comes only once a third of the send
  // buffer is free, which a steady slow reader of a large buffer may take
  // longer than the deadline to drain.
  bool WaitWritable() {
    constexpr int kSliceMs = 250;
    const int fd = sock_.native_handle();
    int queued = OutQueue(fd);
    int64_t idle_ms = 0;
    for (;;) {
      pollfd p{fd, POLLOUT, 0};
      int ready = ::poll(&p, 1, std::min(kSliceMs, timeout_ms_));
      if (ready > 0) return true;
      if (ready < 0 && errno != EINTR) return true;  // the send says what is wrong
      int now = OutQueue(fd);
      if (now >= 0 && now < queued) {
        idle_ms = 0;  // the client took bytes
      } else if (ready == 0) {
        idle_ms += std::min(kSliceMs, timeout_ms_);
      }
      queued = now;
      if (idle_ms >= timeout_ms_) return false;
    }
  }
  static int OutQueue(int fd) {
    int n = 0;
    return ::ioctl(fd, SIOCOUTQ, &n) == 0 ? n : -1;
  }

  tcp::socket& sock_;
  int timeout_ms_;
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

}  // namespace

bool ServeRequest(const Arrived& in, const Handler& handler) {
  BeastExchange ex(in);
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
  return ex.keep_alive();
}

}  // namespace kiln::api
