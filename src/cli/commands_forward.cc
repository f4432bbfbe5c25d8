// kiln sandbox port-forward ID [LOCAL:]REMOTE: a local listener whose
// connections each ride one stream of the sandbox's tunnel WebSocket
// (GET /v1/sandboxes/{id}/tunnel?port=REMOTE; frames in tunnel_frames.h).
//
// One io_context on this thread drives everything: the WebSocket (one read
// and one write in flight, as Beast requires), the acceptor, every local
// socket and the signals that end it. Local reads stop while the credit
// window is full and go on when an `a` frame makes room; the WebSocket read
// stops while one local socket has more than kInboxCap bytes waiting.
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <csignal>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/output.h"
#include "cli/tunnel_frames.h"
#include "cli/url.h"
#include "cli/ws_connect.h"

namespace kiln::cli {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;

namespace {

constexpr std::size_t kInboxCap = 8u << 20;
constexpr std::size_t kMaxMessage = 16u << 20;

class Forwarder {
 public:
  Forwarder(const ApiUrl& url, std::optional<std::string> key, std::string target)
      : url_(url), key_(std::move(key)), target_(std::move(target)) {}

  void Connect() {
    ws_.read_message_max(kMaxMessage);
    ConnectWebSocket(ws_, url_, key_, target_, "tunnel");
    beast::error_code ec;
    ws_.binary(true);
    beast::flat_buffer first;
    ws_.read(first, ec);
    auto ready = nlohmann::json::parse(beast::buffers_to_string(first.data()), nullptr, false);
    if (ec || ws_.got_binary() || !ready.is_object() || ready.value("type", "") != "ready")
      throw ClientError("tunnel_failed", "the tunnel did not start");
  }

  // Listens on address:port; the port listened on (the system's pick for 0).
  int Listen(const std::string& address, int port) {
    beast::error_code ec;
    auto addr = net::ip::make_address(address, ec);
    if (ec) throw UsageError("bad --address " + address + ": an IP address");
    tcp::endpoint ep(addr, static_cast<unsigned short>(port));
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec)
      throw ClientError("listen_failed", "cannot listen on " + address + ":" +
                                             std::to_string(port) + ": " + ec.message());
    return acceptor_.local_endpoint().port();
  }

  int Run() {
    signals_.add(SIGINT);
    signals_.add(SIGTERM);
    signals_.add(SIGHUP);
    signals_.async_wait([this](beast::error_code ec, int sig) {
      if (ec) return;
      signal_ = sig;
      Stop();
    });
    Accept();
    Read();
    ioc_.run();
    if (signal_ != 0) return 0;  // Ctrl-C is how it is meant to end
    std::fprintf(stderr, "kiln: the tunnel ended: %s\n",
                 error_.empty() ? "the daemon closed it" : error_.c_str());
    return 1;
  }

 private:
  struct Conn {
    explicit Conn(net::io_context& ioc) : sock(ioc) {}
    tcp::socket sock;
    std::array<char, kTunnelChunk> buf{};
    std::deque<std::string> out;  // bytes from the sandbox for this socket
    std::size_t out_bytes = 0;
    bool opened = false, reading = false, parked = false, writing = false;
    bool remote_ended = false, remote_closed = false, local_ended = false;
  };
  using ConnPtr = std::shared_ptr<Conn>;

  void Accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket sock) {
      if (ec) return;  // closed by Stop
      auto c = std::make_shared<Conn>(ioc_);
      c->sock = std::move(sock);
      beast::error_code ignored;  // a connection reset already fails its first read
      c->sock.set_option(tcp::no_delay(true), ignored);
      const std::uint32_t id = next_++;
      conns_[id] = c;
      Send(EncodeTunnelFrame('o', id));
      Accept();
    });
  }

  // Reads the local socket while the window has room for a whole chunk.
  void ReadLocal(std::uint32_t id, const ConnPtr& c) {
    if (c->reading || c->local_ended || !c->opened || done_) return;
    if (!window_.Fits(kTunnelChunk)) {
      c->parked = true;
      return;
    }
    c->reading = true;
    c->sock.async_read_some(net::buffer(c->buf), [this, id, c](beast::error_code ec, size_t n) {
      c->reading = false;
      if (done_) return;
      if (ec == net::error::eof) {
        c->local_ended = true;
        Send(EncodeTunnelFrame('e', id));
        return;
      }
      if (ec) return Drop(id, true);
      window_.Spend(n);
      Send(EncodeTunnelFrame('d', id, std::string_view(c->buf.data(), n)));
      ReadLocal(id, c);
    });
  }

  void WriteLocal(std::uint32_t id, const ConnPtr& c) {
    if (c->writing) return;
    if (c->out.empty()) {
      beast::error_code ec;
      if (c->remote_closed) return Drop(id, false);
      if (c->remote_ended) c->sock.shutdown(tcp::socket::shutdown_send, ec);
      return;
    }
    c->writing = true;
    net::async_write(c->sock, net::buffer(c->out.front()),
                     [this, id, c](beast::error_code ec, size_t) {
                       c->writing = false;
                       if (done_) return;
                       if (ec) return Drop(id, true);
                       c->out_bytes -= c->out.front().size();
                       c->out.pop_front();
                       MaybeResume();
                       WriteLocal(id, c);
                     });
  }

  // Forgets a connection; `tell` sends `c` (the sandbox side still thinks it open).
  void Drop(std::uint32_t id, bool tell) {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    beast::error_code ec;
    it->second->sock.close(ec);
    conns_.erase(it);
    if (tell) Send(EncodeTunnelFrame('c', id));
    MaybeResume();  // it may have been the full one
  }

  // Reads the WebSocket again once no local socket has kInboxCap waiting.
  void MaybeResume() {
    if (!read_paused_) return;
    for (const auto& [id, c] : conns_)
      if (c->out_bytes >= kInboxCap) return;
    read_paused_ = false;
    Read();
  }

  void Read() {
    if (ws_reading_ || read_paused_ || done_) return;
    ws_reading_ = true;
    ws_.async_read(in_, [this](beast::error_code ec, size_t) {
      ws_reading_ = false;
      if (ec) {
        if (!done_) error_ = ec.message();
        return Stop();
      }
      std::string message = beast::buffers_to_string(in_.data());
      in_.consume(in_.size());
      if (!ws_.got_binary()) {
        auto ev = nlohmann::json::parse(message, nullptr, false);
        if (ev.is_object() && ev.value("type", "") == "error" && ev.contains("error"))
          error_ = ev["error"].value("message", message);
        return Read();
      }
      auto frame = DecodeTunnelFrame(message);
      if (!frame) {
        error_ = "a bad tunnel frame";
        return Stop();
      }
      if (!Handle(*frame)) return Stop();
      Read();
    });
  }

  bool Handle(const TunnelFrame& f) {
    if (f.kind == 'a') {
      auto count = DecodeTunnelAck(f.payload);
      if (!count || !window_.Ack(*count)) {
        error_ = "a bad credit frame";
        return false;
      }
      for (auto& [id, c] : conns_) {
        if (c->parked && window_.Fits(kTunnelChunk)) {
          c->parked = false;
          ReadLocal(id, c);
        }
      }
      return true;
    }
    auto it = conns_.find(f.stream);
    if (it == conns_.end()) return true;  // one we dropped
    const ConnPtr c = it->second;
    if (!c->opened) {
      if (f.kind != 'o') {
        std::fprintf(stderr, "kiln: connection refused in the sandbox: %.*s\n",
                     static_cast<int>(f.payload.size()), f.payload.data());
        Drop(f.stream, false);
        return true;
      }
      c->opened = true;
      ReadLocal(f.stream, c);
      return true;
    }
    if (f.kind == 'd') {
      c->out.emplace_back(f.payload);
      c->out_bytes += f.payload.size();
      if (c->out_bytes >= kInboxCap) read_paused_ = true;
    } else if (f.kind == 'e') {
      c->remote_ended = true;
    } else if (f.kind == 'c') {
      c->remote_closed = true;
    }
    WriteLocal(f.stream, c);
    return true;
  }

  void Send(std::string frame) {
    if (done_) return;
    ws_out_.push_back(std::move(frame));
    Flush();
  }

  void Flush() {
    if (ws_writing_ || ws_out_.empty() || done_) return;
    ws_writing_ = true;
    ws_.async_write(net::buffer(ws_out_.front()), [this](beast::error_code ec, size_t) {
      ws_writing_ = false;
      if (ec) {
        if (!done_) error_ = ec.message();
        return Stop();
      }
      ws_out_.pop_front();
      Flush();
    });
  }

  void Stop() {
    if (done_) return;
    done_ = true;
    beast::error_code ec;
    acceptor_.close(ec);
    signals_.cancel(ec);
    for (auto& [id, c] : conns_) c->sock.close(ec);
    conns_.clear();
    ws_.next_layer().close(ec);
    ioc_.stop();
  }

  net::io_context ioc_;
  ApiUrl url_;
  std::optional<std::string> key_;
  std::string target_;
  websocket::stream<tcp::socket> ws_{ioc_};
  tcp::acceptor acceptor_{ioc_};
  net::signal_set signals_{ioc_};
  beast::flat_buffer in_;
  std::deque<std::string> ws_out_;
  bool ws_writing_ = false, ws_reading_ = false, read_paused_ = false, done_ = false;
  std::map<std::uint32_t, ConnPtr> conns_;
  std::uint32_t next_ = 1;
  CreditWindow window_;
  int signal_ = 0;
  std::string error_;
};

}  // namespace

int CmdSandboxPortForward(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const PortSpec spec = ParsePortSpec(args.positionals.at(1));
  const std::string address = args.Get("address").value_or("127.0.0.1");
  const ApiUrl url = ctx.http().url();
  const std::optional<std::string> key =
      SelectApiKey(std::getenv("KILN_API_KEY"), std::getenv("RUNTIME_API_KEY"),
                   std::getenv("KILN_ADMIN_KEY_FILE"));
  const std::string target =
      url.base_path + SandboxTarget(id, "/tunnel") + "?port=" + std::to_string(spec.remote);
  std::signal(SIGPIPE, SIG_IGN);
  Forwarder fwd(url, key, target);
  fwd.Connect();
  const int local = fwd.Listen(address, spec.local);
  if (ctx.json()) {
    PrintJson({{"address", address}, {"localPort", local}, {"port", spec.remote}});
  } else {
    PrintOut("Forwarding from " + address + ":" + std::to_string(local) + " -> " +
             std::to_string(spec.remote) + "\n");
  }
  return fwd.Run();
}

}  // namespace kiln::cli
