// The WebSocket an HTTP request was upgraded to (api/http_server.h's
// WebSocket), on Boost.Beast. Internal to the server: beast_exchange.cc makes
// one in UpgradeToWebSocket.
//
// A client may flood the socket with frames that each make a reply, read
// nothing, or go silent; none of these may grow or hold kilnd. So, however
// a message is sent (from the handler's own on_message, on the socket's
// thread, or from another thread):
//  - at most kMaxQueued bytes wait to go out; a client past that is cut
//    (another thread first waits up to the write deadline for room: a
//    terminal's output slows to the client's pace);
//  - each message must be taken within the write deadline, else cut;
//  - nothing from the client for the idle time cuts it; a ping goes out at
//    half of it, so a live client that answers pings stays up for hours.
// "Cut" means the TCP connection ends: Run returns.
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include "api/http_server.h"

namespace kiln::api {

struct WebSocketLimits {
  size_t max_queued = 1 << 20;  // bytes waiting to go out
  int write_timeout_s = 30;     // for each message to be taken
  int idle_timeout_s = 60;      // with nothing from the client
};

class BeastWebSocket : public WebSocket {
 public:
  using tcp = boost::asio::ip::tcp;
  using Request = boost::beast::http::request<boost::beast::http::buffer_body>;

  explicit BeastWebSocket(WebSocketLimits limits) : limits_(limits) {}

  // Takes a duplicate of the connection's descriptor: the HTTP side keeps
  // its own (kilnd's drain still ends this connection by shutting it down).
  bool Attach(const tcp& protocol, int fd);
  // Answers the handshake; false if it failed.
  bool Accept(const Request& req, const std::string& request_id);

  void Run(const std::function<void(std::string_view, bool)>& on_message) override;
  bool Send(std::string data, bool binary) override;
  void Close(uint16_t code, const std::string& reason) override;

  // Bytes queued now (for tests of the cap).
  size_t queued() const;

 private:
  struct Out {
    std::string data;
    bool binary;
    std::optional<boost::beast::websocket::close_reason> close;  // a close frame instead
  };

  void Read();
  void Write();
  // The peer is gone, closed or cut: nothing more is read or written.
  void Ended();

  const WebSocketLimits limits_;
  boost::asio::io_context ioc_;
  boost::beast::websocket::stream<tcp::socket> ws_{ioc_};
  boost::asio::steady_timer write_deadline_{ioc_};
  boost::beast::flat_buffer in_;
  const std::function<void(std::string_view, bool)>* on_message_ = nullptr;
  // The io thread's: what waits to be written, and whether a write runs.
  std::deque<Out> queue_;
  bool writing_ = false;
  bool closing_ = false;
  mutable std::mutex mu_;  // guards open_ and queued_
  std::condition_variable room_;
  bool open_ = true;
  size_t queued_ = 0;
};

}  // namespace kiln::api
