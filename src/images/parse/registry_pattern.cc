#include "images/parse/registry_pattern.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "common/strings.h"

namespace kiln::images {

namespace {

Status Refused(std::string_view text, const std::string& why) {
  return Status(Code::kInvalidRequest,
                "'" + std::string(text) + "' is not a registry host or host:port: " + why);
}

std::optional<int> ParsePort(std::string_view s) {
  int port = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), port);
  if (s.empty() || s.size() > 5 || ec != std::errc() || end != s.data() + s.size() || port < 1 ||
      port > 65535)
    return std::nullopt;
  return port;
}

bool IsV6(const std::string& s) {
  in6_addr addr;
  return inet_pton(AF_INET6, s.c_str(), &addr) == 1;
}

// A DNS name or IPv4 address: letters, digits, '.', '-', labels not empty.
bool IsHostName(std::string_view s) {
  if (s.empty() || s.size() > 253 || s.front() == '.' || s.back() == '.' ||
      s.find("..") != std::string_view::npos)
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-';
  });
}

}  // namespace

Result<RegistryPattern> ParseRegistryPattern(std::string_view text) {
  std::string lower = AsciiLower(text);
  RegistryPattern p;
  std::string_view rest;
  if (!lower.empty() && lower.front() == '[') {
    size_t close = lower.find(']');
    if (close == std::string::npos) return Refused(text, "'[' without ']'");
    p.host = lower.substr(1, close - 1);
    if (!IsV6(p.host)) return Refused(text, "'" + p.host + "' is not an IPv6 address");
    rest = std::string_view(lower).substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return Refused(text, "text after ']'");
  } else if (std::count(lower.begin(), lower.end(), ':') > 1) {
    if (!IsV6(lower)) return Refused(text, "not an IPv6 address (write [v6]:port for a port)");
    p.host = lower;
  } else {
    size_t colon = lower.find(':');
    p.host = lower.substr(0, colon);
    if (colon != std::string::npos) rest = std::string_view(lower).substr(colon);
    if (!IsHostName(p.host))
      return Refused(text, "a host is a DNS name or an address (no scheme, path or user)");
  }
  if (!rest.empty()) {
    p.port = ParsePort(rest.substr(1));
    if (!p.port) return Refused(text, "the port must be a number from 1 to 65535");
  }
  return p;
}

bool RegistryPattern::Matches(const ImageRef& ref) const {
  if (ref.Host() != host) return false;
  return !port || ref.Port() == port;
}

}  // namespace kiln::images
