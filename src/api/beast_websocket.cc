#include "api/beast_websocket.h"

#include <unistd.h>

namespace kiln::api {

namespace net = boost::asio;
namespace websocket = boost::beast::websocket;

bool BeastWebSocket::Attach(const tcp& protocol, int fd) {
  boost::system::error_code ec;
  ws_.next_layer().assign(protocol, fd, ec);
  if (ec) ::close(fd);
  return !ec;
}

bool BeastWebSocket::Accept(const Request& req, const std::string& request_id) {
  // The one subprotocol kiln speaks by name: a browser that offered it
  // (with a terminal ticket beside it) fails the socket unless it is
  // chosen. Other offers are left unanswered, as RFC 6455 allows.
  bool terminal = false;
  std::string_view offered(req[boost::beast::http::field::sec_websocket_protocol]);
  for (size_t at = 0; at != std::string_view::npos;) {
    size_t comma = offered.find(',', at);
    std::string_view item =
        offered.substr(at, comma == std::string_view::npos ? comma : comma - at);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    terminal = terminal || item == "runtime.terminal.v1";
    at = comma == std::string_view::npos ? comma : comma + 1;
  }
  ws_.set_option(
      websocket::stream_base::decorator([request_id, terminal](websocket::response_type& res) {
        res.set("x-request-id", request_id);
        if (terminal)
          res.set(boost::beast::http::field::sec_websocket_protocol, "runtime.terminal.v1");
      }));
  // Beast pings at half the idle time and ends the stream when nothing,
  // not even a pong, came for all of it: an idle terminal whose browser
  // answers pings stays up; a peer that vanished or never reads is let go.
  websocket::stream_base::timeout timeouts{};
  timeouts.handshake_timeout = std::chrono::seconds(30);
  timeouts.idle_timeout = std::chrono::seconds(limits_.idle_timeout_s);
  timeouts.keep_alive_pings = true;
  ws_.set_option(timeouts);
  ws_.read_message_max(1 << 20);
  // Each message as one frame: Beast would cut them into 4 KiB fragments,
  // and clients that read a frame as a message (withruntime's tunnel
  // client) then read garbage.
  ws_.auto_fragment(false);
  boost::system::error_code ec;
  ws_.accept(req, ec);
  return !ec;
}

void BeastWebSocket::Run(const std::function<void(std::string_view, bool)>& on_message) {
  on_message_ = &on_message;
  Read();
  ioc_.run();
  std::lock_guard lock(mu_);
  open_ = false;
  room_.notify_all();
}

bool BeastWebSocket::Send(std::string data, bool binary) {
  std::unique_lock lock(mu_);
  if (!open_) return false;
  if (ioc_.get_executor().running_in_this_thread()) {
    // A reply from on_message: only this thread makes room, so it cannot
    // wait for it. A client whose own frames pile replies past the cap
    // reads too slowly for what it asks: it is cut.
    if (queued_ >= limits_.max_queued) {
      lock.unlock();
      Ended();
      return false;
    }
  } else if (!room_.wait_for(lock, std::chrono::seconds(limits_.write_timeout_s),
                             [this] { return !open_ || queued_ < limits_.max_queued; })) {
    // The client took nothing for the write deadline: the sender (a
    // terminal's output pump) must not wait on it forever.
    lock.unlock();
    net::post(ioc_, [this] { Ended(); });
    return false;
  }
  if (!open_) return false;
  queued_ += data.size();
  lock.unlock();
  net::post(ioc_, [this, data = std::move(data), binary]() mutable {
    queue_.push_back(Out{std::move(data), binary, std::nullopt});
    Write();
  });
  return true;
}

void BeastWebSocket::Close(uint16_t code, const std::string& reason) {
  net::post(ioc_, [this, code, reason] {
    queue_.push_back(
        Out{"", false, websocket::close_reason(static_cast<websocket::close_code>(code), reason)});
    Write();
  });
}

size_t BeastWebSocket::queued() const {
  std::lock_guard lock(mu_);
  return queued_;
}

void BeastWebSocket::Read() {
  {
    std::lock_guard lock(mu_);
    if (!open_) return;  // cut from inside on_message
  }
  ws_.async_read(in_, [this](boost::system::error_code ec, size_t) {
    if (ec) return Ended();
    std::string data = boost::beast::buffers_to_string(in_.data());
    in_.consume(in_.size());
    (*on_message_)(data, ws_.got_binary());
    Read();
  });
}

// One write at a time (Beast's rule); the next starts from its handler.
// Each runs against the write deadline.
void BeastWebSocket::Write() {
  if (writing_ || queue_.empty() || closing_) return;
  {
    std::lock_guard lock(mu_);
    if (!open_) return;
  }
  writing_ = true;
  write_deadline_.expires_after(std::chrono::seconds(limits_.write_timeout_s));
  write_deadline_.async_wait([this](boost::system::error_code ec) {
    if (!ec) Ended();  // not cancelled: the write is still waiting
  });
  Out& out = queue_.front();
  if (out.close) {
    closing_ = true;
    ws_.async_close(*out.close, [this](boost::system::error_code) {
      writing_ = false;
      write_deadline_.cancel();
    });
    return;
  }
  ws_.binary(out.binary);
  ws_.async_write(net::buffer(out.data), [this](boost::system::error_code ec, size_t n) {
    writing_ = false;
    write_deadline_.cancel();
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

void BeastWebSocket::Ended() {
  {
    std::lock_guard lock(mu_);
    open_ = false;
    room_.notify_all();
  }
  // Shut down, not only cancelled: the descriptor is a duplicate of the
  // connection's, and the client must see the connection end.
  boost::system::error_code ec;
  ws_.next_layer().cancel(ec);
  ws_.next_layer().shutdown(tcp::socket::shutdown_both, ec);
  write_deadline_.cancel();
  // Beast's own timers (the idle ping) would keep Run going until they
  // fire; nothing pending matters once the stream is over.
  ioc_.stop();
}

}  // namespace kiln::api
