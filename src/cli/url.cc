#include "cli/url.h"

#include <cctype>
#include <charconv>

#include "cli/errors.h"

namespace kiln::cli {
namespace {

[[noreturn]] void BadUrl(std::string_view text, std::string_view why) {
  throw UsageError("KILN_API_URL '" + std::string(text) + "' " + std::string(why));
}

bool IsUnreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

}  // namespace

std::string ApiUrl::HostHeader() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + port;
}

ApiUrl ParseApiUrl(std::string_view text) {
  std::string_view rest = text;
  if (auto pos = rest.find("://"); pos != std::string_view::npos) {
    std::string scheme(rest.substr(0, pos));
    for (auto& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (scheme == "https") BadUrl(text, "uses https; kiln serves plain HTTP (use http://)");
    if (scheme != "http") BadUrl(text, "has an unsupported scheme (use http://)");
    rest.remove_prefix(pos + 3);
  }
  if (rest.find_first_of("?#") != std::string_view::npos) {
    BadUrl(text, "must not have a query or fragment");
  }
  auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    BadUrl(text, "must not contain credentials (use KILN_API_KEY)");
  }

  ApiUrl url;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {  // [v6]:port
    auto close = authority.find(']');
    if (close == std::string_view::npos) BadUrl(text, "has an unclosed '['");
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') BadUrl(text, "has junk after ']'");
      port = after.substr(1);
    }
  } else {
    auto colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (url.host.empty()) BadUrl(text, "has no host");
  if (url.host.find(':') != std::string::npos && (authority.empty() || authority.front() != '[')) {
    BadUrl(text, "has an IPv6 address without [brackets]");
  }
  if (port.empty()) {
    url.port = "80";
  } else {
    unsigned n = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
    if (ec != std::errc() || end != port.data() + port.size() || n == 0 || n > 65535) {
      BadUrl(text, "has a bad port");
    }
    url.port = std::to_string(n);
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  url.base_path = std::string(path);
  url.display = "http://" + url.HostHeader() + url.base_path;
  return url;
}

std::string PercentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (IsUnreserved(c)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

Query& Query::Add(std::string_view key, std::string_view value) {
  params_.emplace_back(std::string(key), std::string(value));
  return *this;
}

std::string Query::Str() const {
  std::string out;
  for (const auto& [k, v] : params_) {
    out += out.empty() ? '?' : '&';
    out += PercentEncode(k);
    out += '=';
    out += PercentEncode(v);
  }
  return out;
}

std::string SandboxTarget(std::string_view id, std::string_view suffix) {
  return "/v1/sandboxes/" + PercentEncode(id) + std::string(suffix);
}

std::string KeyTarget(std::string_view id, std::string_view suffix) {
  return "/v1/keys/" + PercentEncode(id) + std::string(suffix);
}

std::string SnapshotTarget(std::string_view id, std::string_view suffix) {
  return "/v1/snapshots/" + PercentEncode(id) + std::string(suffix);
}

}  // namespace kiln::cli
