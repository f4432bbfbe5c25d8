// One request and its answer on a connection kilnd's server read it from
// (api/http_server.h's Exchange, on Boost.Beast): the handler's side of a
// connection, run on the request's own thread. Internal to the server.
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <string>

#include "api/beast_websocket.h"
#include "api/http_server.h"

namespace kiln::api {

// What a request's thread gets from the I/O thread: the parsed headers,
// bytes read past them, and the body read so far.
struct Arrived {
  boost::asio::ip::tcp::socket& sock;
  boost::beast::flat_buffer& buf;
  boost::beast::http::request_parser<boost::beast::http::buffer_body>& parser;
  std::string& early_body;
  std::string peer;
  int body_timeout_ms;
  WebSocketLimits websocket;
};

// Runs `handler` on the request, answering it whatever happens (an
// ApiError as its error, anything else as 500); true if the connection may
// serve another request (keep-alive, the body consumed, nothing upgraded
// or relayed).
bool ServeRequest(const Arrived& in, const Handler& handler);

}  // namespace kiln::api
