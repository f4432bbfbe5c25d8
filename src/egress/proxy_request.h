// The head of a request a client sends to an HTTP proxy, parsed with
// Boost.Beast: CONNECT host:port (tunnels, TLS) or an absolute-URI request
// (plain HTTP), and the answers the proxy writes back.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace kiln::egress {

struct ProxyRequest {
  bool connect = false;
  std::string method;
  std::string host;  // as the client wrote it (brackets stripped), not yet validated
  uint16_t port = 0;
  // Plain HTTP: the head to send upstream (origin-form target, no proxy
  // headers, Connection: close). Empty for CONNECT.
  std::string upstream_head;
};

class ProxyRequestParser {
 public:
  enum class Result { kIncomplete, kComplete, kBad };

  ProxyRequestParser();
  ~ProxyRequestParser();

  // Feeds the next bytes from the client. After kComplete, request() and
  // rest() (bytes past the head: a request body, or early tunnel data) are
  // valid; after kBad, error().
  Result Feed(std::string_view bytes);

  const ProxyRequest& request() const { return request_; }
  const std::string& rest() const { return rest_; }
  const std::string& error() const { return error_; }

 private:
  Result Finish();
  Result Bad(std::string message);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string buffer_;
  ProxyRequest request_;
  std::string rest_;
  std::string error_;
};

// "HTTP/1.1 200 Connection Established" and its blank line.
std::string ConnectEstablished();
// An answer from the proxy itself: `status` with an `X-Kiln-Egress: <reason>`
// header and `text` as a plain-text body; the connection closes after it.
std::string ProxyAnswer(int status, std::string_view reason, std::string_view text);

}  // namespace kiln::egress
