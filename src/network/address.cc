#include "network/address.h"
#include "common/strings.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

namespace kiln::network {
namespace {

constexpr std::array<uint8_t, 12> kMappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool IsMapped(const Address& a) {
  return a.v6 && std::equal(kMappedPrefix.begin(), kMappedPrefix.end(), a.bytes.begin());
}

int Bits(const Address& a) { return a.v6 ? 128 : 32; }

// Clears every bit of `a` past `prefix`.
void MaskTo(Address* a, int prefix) {
  for (int i = 0; i < 16; ++i) {
    int keep = std::clamp(prefix - i * 8, 0, 8);
    a->bytes[i] &= static_cast<uint8_t>(0xff00 >> keep);
  }
}

bool SamePrefix(const Address& x, const Address& y, int prefix) {
  Address mx = x, my = y;
  MaskTo(&mx, prefix);
  MaskTo(&my, prefix);
  return mx.bytes == my.bytes;
}

std::optional<Address> ParseV6(const std::string& s) {
  Address a;
  a.v6 = true;
  if (inet_pton(AF_INET6, s.c_str(), a.bytes.data()) != 1) return std::nullopt;
  return Unmapped(a);
}

// Resolvers and browsers read a name whose last label is a number as IPv4 (WHATWG's
// "ends in a number"); if it is not a valid one, nobody agrees on what it means.
bool LooksNumeric(std::string_view label) {
  if (label.size() >= 2 && label[0] == '0' && label[1] == 'x') {
    return std::all_of(label.begin() + 2, label.end(),
                       [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
  }
  return !label.empty() &&
         std::all_of(label.begin(), label.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// How a refused v6 range carries an IPv4 address, if it does.
enum class Embed { kNone, kAt12, kAt2, kTeredo, kLocalNat64 };

struct RefusedRange {
  Cidr range;
  const char* category;
  Embed embed;
};

const std::vector<RefusedRange>& RefusedRanges() {
  // First match wins: single addresses sit before the ranges that contain them.
  static const std::vector<RefusedRange> kRanges = [] {
    const struct {
      const char* cidr;
      const char* category;
      Embed embed;
    } kTable[] = {
        {"255.255.255.255/32", "broadcast", Embed::kNone},
        // Cloud metadata and host services outside the private ranges:
        // Azure's wire server (and its DNS), Alibaba's, Oracle's.
        {"168.63.129.16/32", "metadata", Embed::kNone},
        {"100.100.100.200/32", "metadata", Embed::kNone},
        {"0.0.0.0/8", "unspecified", Embed::kNone},
        {"10.0.0.0/8", "private", Embed::kNone},
        {"100.64.0.0/10", "shared", Embed::kNone},
        {"127.0.0.0/8", "loopback", Embed::kNone},
        {"169.254.0.0/16", "link-local", Embed::kNone},
        {"172.16.0.0/12", "private", Embed::kNone},
        {"192.0.0.0/24", "reserved", Embed::kNone},
        {"192.168.0.0/16", "private", Embed::kNone},
        {"198.18.0.0/15", "reserved", Embed::kNone},
        {"224.0.0.0/4", "multicast", Embed::kNone},
        {"240.0.0.0/4", "reserved", Embed::kNone},
        {"fd00:ec2::254/128", "metadata", Embed::kNone},
        {"::/128", "unspecified", Embed::kNone},
        {"::1/128", "loopback", Embed::kNone},
        {"::/96", "", Embed::kAt12},            // IPv4-compatible
        {"::ffff:0:0/96", "", Embed::kAt12},    // IPv4-mapped
        {"::ffff:0:0:0/96", "", Embed::kAt12},  // SIIT IPv4-translated
        {"64:ff9b::/96", "", Embed::kAt12},     // NAT64
        {"64:ff9b:1::/48", "reserved", Embed::kLocalNat64},
        {"2002::/16", "", Embed::kAt2},  // 6to4
        {"2001::/32", "", Embed::kTeredo},
        {"100::/64", "reserved", Embed::kNone},  // discard
        {"fc00::/7", "private", Embed::kNone},
        {"fe80::/10", "link-local", Embed::kNone},
        {"fec0::/10", "reserved", Embed::kNone},
        {"ff00::/8", "multicast", Embed::kNone},
    };
    std::vector<RefusedRange> ranges;
    for (const auto& row : kTable) {
      // ParseCidr would turn ::ffff:0:0/96 into 0.0.0.0/0; build these ranges as v6.
      Address base;
      base.v6 = std::string_view(row.cidr).find(':') != std::string_view::npos;
      std::string text(row.cidr);
      std::string addr = text.substr(0, text.find('/'));
      inet_pton(base.v6 ? AF_INET6 : AF_INET, addr.c_str(), base.bytes.data());
      ranges.push_back(
          {Cidr{base, std::stoi(text.substr(text.find('/') + 1))}, row.category, row.embed});
    }
    return ranges;
  }();
  return kRanges;
}

// The v4 range carried by the v6 range `c` at byte `offset` (XOR 0xff for Teredo).
Cidr EmbeddedV4(const Cidr& c, int offset, bool flip) {
  Cidr v4;
  for (int i = 0; i < 4; ++i) {
    v4.base.bytes[i] = c.base.bytes[offset + i] ^ (flip ? 0xff : 0);
  }
  v4.prefix = std::clamp(c.prefix - offset * 8, 0, 32);
  MaskTo(&v4.base, v4.prefix);
  return v4;
}

}  // namespace

Address Address::V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  Address addr;
  addr.bytes[0] = a;
  addr.bytes[1] = b;
  addr.bytes[2] = c;
  addr.bytes[3] = d;
  return addr;
}

std::string Address::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof(buf));
  return buf;
}

std::optional<Address> Address::FromSockaddr(const sockaddr* sa) {
  if (sa == nullptr) return std::nullopt;
  Address a;
  // memcpy: `sa` may point into a byte buffer with no alignment for sockaddr_in6.
  if (sa->sa_family == AF_INET) {
    sockaddr_in in;
    std::memcpy(&in, sa, sizeof(in));
    std::memcpy(a.bytes.data(), &in.sin_addr, 4);
    return a;
  }
  if (sa->sa_family == AF_INET6) {
    sockaddr_in6 in6;
    std::memcpy(&in6, sa, sizeof(in6));
    a.v6 = true;
    std::memcpy(a.bytes.data(), &in6.sin6_addr, 16);
    return Unmapped(a);
  }
  return std::nullopt;
}

socklen_t Address::ToSockaddr(uint16_t port, sockaddr_storage* out) const {
  std::memset(out, 0, sizeof(*out));
  if (v6) {
    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(port);
    std::memcpy(&in6.sin6_addr, bytes.data(), 16);
    std::memcpy(out, &in6, sizeof(in6));
    return sizeof(in6);
  }
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  std::memcpy(&in.sin_addr, bytes.data(), 4);
  std::memcpy(out, &in, sizeof(in));
  return sizeof(in);
}

Address Unmapped(const Address& a) {
  if (!IsMapped(a)) return a;
  return Address::V4(a.bytes[12], a.bytes[13], a.bytes[14], a.bytes[15]);
}

std::optional<Address> ParseIpLiteral(std::string_view host) {
  // A NUL would end the C string that inet_pton/inet_aton read before the text does.
  if (host.empty() || host.find('\0') != std::string_view::npos) return std::nullopt;
  std::string s = AsciiLower(host);
  if (s.front() == '[') {
    if (s.size() < 2 || s.back() != ']') return std::nullopt;
    s = s.substr(1, s.size() - 2);
    if (s.find(':') == std::string::npos) return std::nullopt;  // brackets are for v6 only
  }
  if (s.find(':') != std::string::npos) return ParseV6(s);
  if (s.back() == '.') s.pop_back();
  // inet_aton stops at whitespace and ignores what follows; only accept what it reads.
  if (s.empty() || s.find_first_not_of("0123456789abcdefx.") != std::string::npos) {
    return std::nullopt;
  }
  in_addr in{};
  if (inet_aton(s.c_str(), &in) == 0) return std::nullopt;
  Address a;
  std::memcpy(a.bytes.data(), &in, 4);
  return a;
}

Result<std::string> NormalizeHost(std::string_view host) {
  auto fail = [](const char* why) { return Status(Code::kInvalidRequest, why); };
  if (host.empty()) return fail("is empty");
  for (char c : host) {
    if (c == '\0') return fail("contains a NUL byte");
    if (std::isspace(static_cast<unsigned char>(c))) return fail("contains whitespace");
    if (c == '%') return fail("contains '%' (zone ids and URL escapes are not accepted)");
    if (c == '/') return fail("contains '/'");
    if (c == '@') return fail("contains '@'");
  }
  std::string s = AsciiLower(host);
  if (s.front() == '[') {
    std::string inner = s.size() >= 2 && s.back() == ']' ? s.substr(1, s.size() - 2) : "";
    if (inner.find(':') == std::string::npos || !ParseIpLiteral(inner)) {
      return fail("has brackets that do not enclose an IPv6 address");
    }
    return inner;
  }
  if (s.find(':') != std::string::npos) {
    if (!ParseIpLiteral(s)) return fail("is not a valid IPv6 address (ports are not accepted)");
    return s;
  }
  if (s.back() == '.') s.pop_back();
  if (s.empty()) return fail("is empty");
  // Only one trailing dot: "1.2.3.4.." would otherwise reach ParseIpLiteral
  // (which takes one more) and be kept as a name that is really an address.
  if (s.back() == '.') return fail("has an empty label");
  if (ParseIpLiteral(s)) return s;
  if (s.size() > 253) return fail("is longer than 253 characters");
  size_t start = 0;
  while (true) {
    size_t end = s.find('.', start);
    std::string_view label = std::string_view(s).substr(start, end - start);
    if (label.empty()) return fail("has an empty label");
    if (label.size() > 63) return fail("has a label longer than 63 characters");
    if (label.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_") != label.npos) {
      return fail("has a character outside a-z, 0-9, '-', '_' and '.'");
    }
    if (end == std::string::npos) {
      if (LooksNumeric(label)) return fail("ends in a number but is not a valid IPv4 address");
      break;
    }
    start = end + 1;
  }
  return s;
}

bool Cidr::Contains(const Address& a) const {
  return a.v6 == base.v6 && SamePrefix(a, base, prefix);
}

std::string Cidr::ToString() const { return base.ToString() + "/" + std::to_string(prefix); }

Result<Cidr> ParseCidr(std::string_view s) {
  auto fail = [](std::string why) { return Status(Code::kInvalidRequest, std::move(why)); };
  if (s.find('\0') != std::string_view::npos) return fail("contains a NUL byte");
  size_t slash = s.find('/');
  std::string addr(s.substr(0, slash));
  Cidr c;
  c.base.v6 = addr.find(':') != std::string::npos;
  if (inet_pton(c.base.v6 ? AF_INET6 : AF_INET, addr.c_str(), c.base.bytes.data()) != 1) {
    return fail("'" + addr + "' is not a dotted-quad IPv4 or an IPv6 address");
  }
  c.prefix = Bits(c.base);
  if (slash != std::string_view::npos) {
    std::string_view p = s.substr(slash + 1);
    bool digits = !p.empty() && p.size() <= 3 && p.find_first_not_of("0123456789") == p.npos;
    if (!digits || (p.size() > 1 && p[0] == '0') || std::stoi(std::string(p)) > c.prefix) {
      return fail("prefix length must be a number from 0 to " + std::to_string(c.prefix));
    }
    c.prefix = std::stoi(std::string(p));
  }
  if (IsMapped(c.base) && c.prefix >= 96) {
    c.base = Unmapped(c.base);
    c.prefix -= 96;
  }
  MaskTo(&c.base, c.prefix);
  return c;
}

std::string RefusedCategory(const Address& a) { return RefusedCategory(Cidr{a, Bits(a)}); }

std::string RefusedCategory(const Cidr& c) {
  for (const RefusedRange& r : RefusedRanges()) {
    if (c.prefix < r.range.prefix || !r.range.Contains(c.base)) continue;
    switch (r.embed) {
      case Embed::kNone:
        return r.category;
      case Embed::kAt12:
        return RefusedCategory(EmbeddedV4(c, 12, false));
      case Embed::kAt2:
        return RefusedCategory(EmbeddedV4(c, 2, false));
      case Embed::kTeredo:
        return RefusedCategory(EmbeddedV4(c, 12, true));
      case Embed::kLocalNat64: {
        // Local-use NAT64 (RFC 8215) is never routed publicly: refused whatever it carries.
        std::string inner = RefusedCategory(EmbeddedV4(c, 12, false));
        return inner.empty() ? r.category : inner;
      }
    }
  }
  return "";
}

}  // namespace kiln::network
