// Fuzzes the egress proxy's request parser (src/egress/proxy_request.h): the
// head of a request a sandbox sends to its HTTP proxy, CONNECT or absolute
// URI, fed in pieces as it arrives, and the upstream head rebuilt from it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "egress/proxy_request.h"
#include "fuzz_util.h"
#include "network/address.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  std::string_view input = fuzz::AsText(data, size);
  egress::ProxyRequestParser parser;
  size_t piece = 1 + (size % 97);
  auto result = egress::ProxyRequestParser::Result::kIncomplete;
  while (!input.empty() && result == egress::ProxyRequestParser::Result::kIncomplete) {
    size_t n = std::min(piece, input.size());
    result = parser.Feed(input.substr(0, n));
    input.remove_prefix(n);
  }
  if (result != egress::ProxyRequestParser::Result::kComplete) return 0;
  const auto& req = parser.request();
  // What the proxy does next with the host: literal or name, then the rules.
  if (!network::ParseIpLiteral(req.host)) static_cast<void>(network::NormalizeHost(req.host));
  // The rebuilt head must itself be a complete request for the upstream.
  if (!req.connect && req.upstream_head.find("\r\n\r\n") == std::string::npos) __builtin_trap();
  return 0;
}
