#include "network/internal_endpoints.h"

#include <charconv>

namespace kiln::network {

Result<InternalEndpoint> ParseInternalEndpoint(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalidRequest, "internal endpoint '" + std::string(text.substr(0, 128)) +
                                             "': " + why +
                                             " (NAME=ADDRESS:PORT, as trainer=10.0.0.5:18001)");
  };
  size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) return bad("names no NAME");
  auto name = NormalizeHost(text.substr(0, eq));
  if (!name.ok()) return bad("the name " + name.status().message());
  if (ParseIpLiteral(*name)) return bad("NAME must be a host name, not an address");
  std::string_view target = text.substr(eq + 1);
  size_t colon = target.rfind(':');
  if (colon == std::string_view::npos) return bad("names no PORT");
  std::string_view host = target.substr(0, colon), port_text = target.substr(colon + 1);
  int port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 || port > 65535)
    return bad("PORT must be 1 to 65535");
  // The address in its one strict spelling: an operator's flag, not a
  // sandbox's trick.
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  auto cidr = ParseCidr(host);
  if (!cidr.ok() || host.find('/') != std::string_view::npos)
    return bad("ADDRESS must be an IPv4 or IPv6 address");
  return InternalEndpoint{*std::move(name), cidr->base, port};
}

InternalEndpoints::InternalEndpoints(std::vector<InternalEndpoint> endpoints)
    : endpoints_(std::move(endpoints)) {}

const InternalEndpoint* InternalEndpoints::ByName(std::string_view name) const {
  for (const auto& e : endpoints_)
    if (e.name == name) return &e;
  return nullptr;
}

const InternalEndpoint* InternalEndpoints::At(const Address& address, int port) const {
  Address a = Unmapped(address);
  for (const auto& e : endpoints_)
    if (e.address == a && e.port == port) return &e;
  return nullptr;
}

}  // namespace kiln::network
