#include "egress/proxy_request.h"

#include <boost/algorithm/string/predicate.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>

#include <charconv>
#include <sstream>

namespace kiln::egress {

namespace http = boost::beast::http;

namespace {

constexpr size_t kMaxHead = 64 * 1024;

// Splits "host:port", "[v6]:port" or (with a default port) "host".
bool SplitAuthority(std::string_view auth, uint16_t default_port, std::string* host,
                    uint16_t* port) {
  std::string_view port_text;
  if (!auth.empty() && auth.front() == '[') {
    size_t close = auth.find(']');
    if (close == std::string_view::npos) return false;
    *host = std::string(auth.substr(1, close - 1));
    std::string_view after = auth.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return false;
      port_text = after.substr(1);
    }
  } else {
    size_t colon = auth.rfind(':');
    if (colon != std::string_view::npos) {
      if (auth.find(':') != colon) return false;  // a bare v6 address needs brackets
      port_text = auth.substr(colon + 1);
      auth = auth.substr(0, colon);
    }
    *host = std::string(auth);
  }
  if (host->empty()) return false;
  if (port_text.empty()) {
    if (default_port == 0) return false;
    *port = default_port;
    return true;
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || value == 0 ||
      value > 65535)
    return false;
  *port = static_cast<uint16_t>(value);
  return true;
}

}  // namespace

struct ProxyRequestParser::Impl {
  http::request_parser<http::empty_body> parser;
};

ProxyRequestParser::ProxyRequestParser() : impl_(std::make_unique<Impl>()) {
  impl_->parser.header_limit(kMaxHead);
  impl_->parser.eager(false);
}

ProxyRequestParser::~ProxyRequestParser() = default;

ProxyRequestParser::Result ProxyRequestParser::Bad(std::string message) {
  error_ = std::move(message);
  return Result::kBad;
}

ProxyRequestParser::Result ProxyRequestParser::Feed(std::string_view bytes) {
  if (!error_.empty()) return Result::kBad;
  buffer_.append(bytes);
  if (buffer_.size() > kMaxHead + 64 * 1024) return Bad("request head too large");
  boost::beast::error_code ec;
  // Beast consumes whole lines of the head and keeps them; what it used is
  // dropped even when it needs more, or the next call would feed it again.
  size_t used = impl_->parser.put(boost::asio::buffer(buffer_), ec);
  buffer_.erase(0, used);
  if (ec == http::error::need_more) return Result::kIncomplete;
  if (ec) return Bad("malformed request: " + ec.message());
  if (!impl_->parser.is_header_done()) return Result::kIncomplete;
  return Finish();
}

ProxyRequestParser::Result ProxyRequestParser::Finish() {
  auto& req = impl_->parser.get();
  request_.method = std::string(req.method_string());
  std::string_view target(req.target().data(), req.target().size());
  if (req.method() == http::verb::connect) {
    request_.connect = true;
    if (!SplitAuthority(target, 0, &request_.host, &request_.port))
      return Bad("CONNECT needs host:port, got '" + std::string(target) + "'");
    rest_ = std::move(buffer_);
    return Result::kComplete;
  }
  constexpr std::string_view kScheme = "http://";
  if (target.size() < kScheme.size() ||
      !boost::algorithm::iequals(target.substr(0, kScheme.size()), kScheme)) {
    return Bad("a proxy request needs an absolute http:// URI or CONNECT, got '" +
               std::string(target.substr(0, 200)) + "'");
  }
  std::string_view after = target.substr(kScheme.size());
  size_t end = after.find_first_of("/?#");
  std::string_view auth = after.substr(0, end);
  if (auth.find('@') != std::string_view::npos) return Bad("user information in the URI");
  if (!SplitAuthority(auth, 80, &request_.host, &request_.port))
    return Bad("bad host in '" + std::string(target.substr(0, 200)) + "'");
  std::string origin = end == std::string_view::npos ? "/" : std::string(after.substr(end));
  if (origin.front() != '/') origin.insert(0, "/");
  if (size_t hash = origin.find('#'); hash != std::string::npos) origin.resize(hash);

  http::request_header<> head = req.base();
  head.target(origin);
  head.erase("Proxy-Connection");
  head.erase("Proxy-Authorization");
  head.set(http::field::connection, "close");
  if (head.find(http::field::host) == head.end()) head.set(http::field::host, std::string(auth));
  std::ostringstream out;
  out << head;
  request_.upstream_head = out.str();
  rest_ = std::move(buffer_);
  return Result::kComplete;
}

std::string ConnectEstablished() { return "HTTP/1.1 200 Connection Established\r\n\r\n"; }

std::string ProxyAnswer(int status, std::string_view reason, std::string_view text) {
  http::response<http::string_body> res{static_cast<http::status>(status), 11};
  res.set("X-Kiln-Egress", std::string(reason));
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  res.set(http::field::connection, "close");
  res.body() = std::string(text) + "\n";
  res.prepare_payload();
  std::ostringstream out;
  out << res;
  return out.str();
}

}  // namespace kiln::egress
