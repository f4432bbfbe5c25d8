#include "images/parse/image_ref.h"

#include <arpa/inet.h>

#include <cstring>
#include <vector>

#include "common/path_ids.h"
#include "common/strings.h"

namespace kiln::images {
namespace {

constexpr std::string_view kDockerHub = "docker.io";
constexpr size_t kMaxNameLength = 255;

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f'); }

std::string InQuotes(std::string_view s) { return "'" + std::string(s) + "'"; }

Status RefError(std::string_view text, std::string message) {
  return Status(Code::kInvalidRequest, "invalid image reference " + InQuotes(text) + ": " + message,
                {{"reference", std::string(text)}});
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) return out;
    start = pos + 1;
  }
}

// [a-z0-9]+ ( ("." | "_" | "__" | "-"+) [a-z0-9]+ )*
bool ValidPathComponent(std::string_view c) {
  if (c.empty() || !IsLowerAlnum(c.front()) || !IsLowerAlnum(c.back())) return false;
  for (size_t i = 0; i < c.size();) {
    if (IsLowerAlnum(c[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    if (c[i] == '.') {
      j = i + 1;
    } else if (c[i] == '_') {
      j = (i + 1 < c.size() && c[i + 1] == '_') ? i + 2 : i + 1;
    } else if (c[i] == '-') {
      while (j < c.size() && c[j] == '-') ++j;
    } else {
      return false;
    }
    if (j >= c.size() || !IsLowerAlnum(c[j])) return false;
    i = j;
  }
  return true;
}

// ([a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]) ("." the same)*
bool ValidDomainName(std::string_view host) {
  for (std::string_view label : Split(host, '.')) {
    if (label.empty() || !IsAlnum(label.front()) || !IsAlnum(label.back())) return false;
    for (char c : label) {
      if (!IsAlnum(c) && c != '-') return false;
    }
  }
  return true;
}

// Splits "host[:port]" (host possibly "[v6]"); false when malformed.
bool SplitHostPort(std::string_view domain, std::string_view* host, std::string_view* port) {
  *port = {};
  if (!domain.empty() && domain.front() == '[') {
    size_t close = domain.find(']');
    if (close == std::string_view::npos) return false;
    *host = domain.substr(0, close + 1);
    std::string_view rest = domain.substr(close + 1);
    if (rest.empty()) return true;
    if (rest.front() != ':') return false;
    *port = rest.substr(1);
    return !port->empty();
  }
  size_t colon = domain.find(':');
  *host = domain.substr(0, colon);
  if (colon != std::string_view::npos) {
    *port = domain.substr(colon + 1);
    if (port->empty()) return false;
  }
  return true;
}

std::optional<std::string> DomainProblem(std::string_view domain) {
  std::string_view host, port;
  if (!SplitHostPort(domain, &host, &port)) return "malformed registry " + InQuotes(domain);
  if (!port.empty()) {
    for (char c : port) {
      if (!IsDigit(c)) return "registry port " + InQuotes(port) + " is not a number";
    }
  }
  if (host.empty()) return "empty registry host";
  if (host.front() == '[') {
    std::string v6(host.substr(1, host.size() - 2));
    in6_addr addr;
    if (inet_pton(AF_INET6, v6.c_str(), &addr) != 1) {
      return "registry " + InQuotes(host) + " is not a valid IPv6 address";
    }
    return std::nullopt;
  }
  if (!ValidDomainName(host))
    return "registry host " + InQuotes(host) + " is not a valid host name";
  return std::nullopt;
}

}  // namespace

std::string ImageRef::Repository() const { return domain + "/" + path; }

std::string ImageRef::String() const {
  std::string out = Repository();
  if (tag) out += ":" + *tag;
  if (digest) out += "@" + *digest;
  if (!tag && !digest) out += ":latest";
  return out;
}

std::string ImageRef::Host() const {
  std::string_view host, port;
  if (!SplitHostPort(domain, &host, &port)) return "";
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  return AsciiLower(host);
}

std::optional<int> ImageRef::Port() const {
  std::string_view host, port;
  if (!SplitHostPort(domain, &host, &port) || port.empty() || port.size() > 5) return std::nullopt;
  int n = 0;
  for (char c : port) {
    if (!IsDigit(c)) return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

bool ImageRef::IsLoopback() const {
  std::string_view host, port;
  if (!SplitHostPort(domain, &host, &port)) return false;
  if (host == "localhost") return true;
  if (host == "[::1]") return true;
  if (!host.empty() && host.front() == '[') {
    std::string v6(host.substr(1, host.size() - 2));
    in6_addr addr;
    return inet_pton(AF_INET6, v6.c_str(), &addr) == 1 &&
           std::memcmp(&addr, &in6addr_loopback, sizeof addr) == 0;
  }
  std::string v4(host);
  in_addr addr;
  if (inet_pton(AF_INET, v4.c_str(), &addr) != 1) return false;
  return (ntohl(addr.s_addr) >> 24) == 127;
}

Result<ImageRef> ParseImageRef(std::string_view text) {
  if (text.empty()) return RefError(text, "it is empty");
  for (char c : text) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return RefError(text, "it contains whitespace or a control character");
    }
  }
  ImageRef ref;
  std::string_view rest = text;
  if (size_t at = rest.find('@'); at != std::string_view::npos) {
    std::string_view digest = rest.substr(at + 1);
    rest = rest.substr(0, at);
    constexpr std::string_view kPrefix = "sha256:";
    if (digest.substr(0, kPrefix.size()) != kPrefix) {
      return RefError(text, "digest " + InQuotes(digest) + " is not sha256:<64 hex digits>");
    }
    std::string_view hex = digest.substr(kPrefix.size());
    bool hex_ok = hex.size() == 64;
    for (char c : hex) hex_ok = hex_ok && IsHex(c);
    if (!hex_ok) {
      return RefError(text,
                      "digest " + InQuotes(digest) + " is not sha256:<64 lowercase hex digits>");
    }
    ref.digest = std::string(digest);
  }
  // A tag follows the last ':' that comes after the last '/' (a ':' before it is a port).
  size_t colon = rest.rfind(':');
  size_t slash = rest.rfind('/');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    std::string_view tag = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    if (Status s = ValidateTag(tag); !s.ok()) return RefError(text, s.message());
    ref.tag = std::string(tag);
  }
  if (rest.empty()) return RefError(text, "the repository name is empty");

  std::string_view path = rest;
  size_t first_slash = rest.find('/');
  if (first_slash != std::string_view::npos) {
    std::string_view first = rest.substr(0, first_slash);
    if (first.find('.') != std::string_view::npos || first.find(':') != std::string_view::npos ||
        first == "localhost") {
      if (auto problem = DomainProblem(first)) return RefError(text, *problem);
      ref.domain = std::string(first);
      path = rest.substr(first_slash + 1);
    }
  }
  if (ref.domain.empty() || ref.domain == "index.docker.io") ref.domain = std::string(kDockerHub);
  for (std::string_view component : Split(path, '/')) {
    if (component.empty()) return RefError(text, "the repository path has an empty component");
    if (!ValidPathComponent(component)) {
      bool upper = false;
      for (char c : component) upper = upper || (c >= 'A' && c <= 'Z');
      return RefError(text, upper ? "repository name must be lowercase"
                                  : "repository path component " + InQuotes(component) +
                                        " is invalid: lowercase letters and digits, separated "
                                        "by '.', '_', '__' or '-'");
    }
  }
  ref.path = std::string(path);
  if (ref.domain == kDockerHub && ref.path.find('/') == std::string::npos) {
    ref.path = "library/" + ref.path;
  }
  if (ref.Repository().size() > kMaxNameLength) {
    return RefError(text, "the repository name is longer than 255 characters");
  }
  return ref;
}

Status ValidateImageName(std::string_view name) {
  if (name.empty()) return Status(Code::kInvalidRequest, "image name is empty");
  if (name.size() > 128) {
    return Status(Code::kInvalidRequest, "image name is longer than 128 characters");
  }
  if (!IsLowerAlnum(name.front())) {
    return Status(Code::kInvalidRequest,
                  "image name " + InQuotes(name) + " must start with a lowercase letter or digit");
  }
  for (char c : name) {
    if (!IsLowerAlnum(c) && c != '.' && c != '_' && c != '-' && c != '/') {
      return Status(Code::kInvalidRequest,
                    "image name " + InQuotes(name) +
                        " may only hold lowercase letters, digits, '.', '_', '-' and '/'");
    }
  }
  return Status::Ok();
}

Status ValidateTag(std::string_view tag) {
  auto word = [](char c) { return IsAlnum(c) || c == '_'; };
  bool ok = !tag.empty() && tag.size() <= 128 && word(tag.front());
  for (char c : tag) ok = ok && (word(c) || c == '.' || c == '-');
  if (!ok) {
    return Status(Code::kInvalidRequest,
                  "tag " + InQuotes(tag) +
                      " is invalid: 1-128 of letters, digits, '_', '.' and '-', not starting "
                      "with '.' or '-'");
  }
  return Status::Ok();
}

Status ValidateContextName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= 64 && IsLowerAlnum(name.front());
  for (char c : name) ok = ok && (IsLowerAlnum(c) || c == '.' || c == '_' || c == '-');
  if (!ok)
    return Status(Code::kInvalidRequest,
                  "context name " + InQuotes(name) +
                      " is invalid: 1-64 of lowercase letters, digits, '.', '_' and '-', "
                      "starting with a letter or digit");
  return Status::Ok();
}

Result<KilnImageRef> ParseKilnImageRef(std::string_view text) {
  KilnImageRef ref;
  if (Uuid::Parse(text)) {
    ref.name = std::string(text);
    ref.is_id = true;
    return ref;
  }
  std::string_view name = text;
  size_t sep = text.find_first_of(":@");
  if (sep != std::string_view::npos) {
    name = text.substr(0, sep);
    std::string_view after = text.substr(sep + 1);
    if (after.find_first_of(":@") != std::string_view::npos) {
      return Status(Code::kInvalidRequest,
                    "image " + InQuotes(text) + ": give either name:tag or name@version, not both",
                    {{"image", std::string(text)}});
    }
    if (text[sep] == ':') {
      if (Status s = ValidateTag(after); !s.ok()) {
        return Status(Code::kInvalidRequest, "image " + InQuotes(text) + ": " + s.message(),
                      {{"image", std::string(text)}});
      }
      ref.tag = std::string(after);
    } else {
      int version = 0;
      bool ok = !after.empty() && after.size() <= 9 && after.front() != '0';
      for (char c : after) {
        ok = ok && IsDigit(c);
        if (ok) version = version * 10 + (c - '0');
      }
      if (!ok || version < 1) {
        return Status(Code::kInvalidRequest,
                      "image " + InQuotes(text) + ": version " + InQuotes(after) +
                          " is not a whole number >= 1",
                      {{"image", std::string(text)}});
      }
      ref.version = version;
    }
  }
  if (Status s = ValidateImageName(name); !s.ok()) {
    return Status(Code::kInvalidRequest, "image " + InQuotes(text) + ": " + s.message(),
                  {{"image", std::string(text)}});
  }
  ref.name = std::string(name);
  return ref;
}

}  // namespace kiln::images
