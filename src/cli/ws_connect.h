// The CLI's WebSocket handshake with kilnd (the terminal, the tunnel):
// connect, key and user agent, and kilnd's refusal as the CLI's error.
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <optional>
#include <string>

#include "cli/errors.h"
#include "cli/url.h"

namespace kiln::cli {

// Connects `ws` to `url` and completes the handshake for `target`; throws
// UnreachableError, kilnd's refusal (MakeApiError) or connection_lost naming
// `what` ("terminal", "tunnel").
inline void ConnectWebSocket(boost::beast::websocket::stream<boost::asio::ip::tcp::socket>& ws,
                             const ApiUrl& url, const std::optional<std::string>& key,
                             const std::string& target, const std::string& what) {
  namespace http = boost::beast::http;
  namespace websocket = boost::beast::websocket;
  using tcp = boost::asio::ip::tcp;
  tcp::resolver resolver(ws.get_executor());
  boost::beast::error_code ec;
  auto endpoints = resolver.resolve(url.host, url.port, ec);
  if (!ec) boost::asio::connect(ws.next_layer(), endpoints, ec);
  if (ec) throw UnreachableError(url.display);
  ws.next_layer().set_option(tcp::no_delay(true));
  ws.set_option(websocket::stream_base::decorator([key](websocket::request_type& req) {
    if (key) req.set(http::field::authorization, "Bearer " + *key);
    req.set(http::field::user_agent, "kiln-cli");
  }));
  websocket::response_type res;
  ws.handshake(res, url.HostHeader(), target, ec);
  if (ec == websocket::error::upgrade_declined)
    throw MakeApiError(static_cast<unsigned>(res.result_int()), res.body());
  if (ec)
    throw ClientError("connection_lost", "the " + what + " handshake with " + url.display +
                                             " failed: " + ec.message());
}

}  // namespace kiln::cli
