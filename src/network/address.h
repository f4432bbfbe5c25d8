// IP addresses and host names as the egress policy sees them. Everything here is pure
// (no I/O, no DNS): the proxy that enforces the policy calls it on what a sandbox asks for.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kiln::network {

// An IP address, v4 kept as v4 (never as mapped v6), so that a rule on 10.0.0.0/8 and a
// client that writes ::ffff:10.0.0.1 meet on the same bytes.
struct Address {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // v4: first 4 bytes, the rest zero

  static Address V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d);
  // Canonical text: "203.0.113.5", "2001:db8::1".
  std::string ToString() const;
  bool operator==(const Address&) const = default;
  // AF_INET / AF_INET6 (an IPv4-mapped v6 comes back as v4); nullopt for anything else.
  static std::optional<Address> FromSockaddr(const sockaddr* sa);
  // Fills `out` for connect() with `port`; returns its length.
  socklen_t ToSockaddr(uint16_t port, sockaddr_storage* out) const;
};

// `a` with an IPv4-mapped v6 (::ffff:a.b.c.d) turned into the v4 address; else `a`.
Address Unmapped(const Address& a);

// Parses a host as a client may write it in a URL or CONNECT target, if it is an IP
// literal, in every spelling that resolvers accept and so an attacker may use: dotted
// quad, one 32-bit number (2130706433), octal (0177.0.0.1), hex (0x7f.0.0.1, 0x7f000001),
// short forms (127.1), v6 with or without brackets ([::1]), IPv4-mapped v6
// ([::ffff:127.0.0.1], returned as v4), and one trailing dot on v4 ("127.0.0.1.").
// Case-insensitive. nullopt for anything else, including a v6 zone id ("fe80::1%eth0").
std::optional<Address> ParseIpLiteral(std::string_view host);

// Lower-cases a host and strips one trailing dot and v6 brackets. kInvalidRequest, its
// message completing "the host ...", for something that is not a valid host: empty, longer than
// 253, an empty label or one over 63 characters, characters outside [a-z0-9-_.] in a name, '%',
// '/', '@', whitespace or NUL, or a name whose last label is a number (0x7g.0.0.1, 1.2.3.4.5):
// resolvers and browsers read those as IPv4 and would not agree on which.
Result<std::string> NormalizeHost(std::string_view host);

// A range of addresses of one family; `base` has every bit past `prefix` cleared.
struct Cidr {
  Address base;
  int prefix = 0;
  bool Contains(const Address& a) const;  // false across families
  std::string ToString() const;           // "203.0.113.0/24"
  bool operator==(const Cidr&) const = default;
};

// "203.0.113.0/24", "2001:db8::/32"; a bare address is a /32 or /128. The address part
// must be a strict dotted quad or v6 (inet_pton); host bits are cleared. An IPv4-mapped
// v6 range of /96 or longer becomes the v4 range. kInvalidRequest on bad syntax.
Result<Cidr> ParseCidr(std::string_view s);

// Why connections to `a` are always refused, or "" for a public address. One of
// "unspecified", "loopback", "private", "shared", "link-local", "multicast", "broadcast",
// "reserved", "metadata". v6 forms that carry an IPv4 address (mapped, compatible,
// SIIT-translated, NAT64, 6to4, Teredo) get the category of that v4 address.
// Documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32)
// are public: tests use them as outside hosts.
std::string RefusedCategory(const Address& a);
// The category if every address of `c` lies in one refused range, else "".
std::string RefusedCategory(const Cidr& c);

}  // namespace kiln::network
