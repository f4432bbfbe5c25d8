// Fuzzes the egress rules' address and host parsing (src/network): the first
// line of an input is a host as a client writes it in a URL or CONNECT
// target; the rest, when it is JSON, is a sandbox's `network` rules. The host
// is parsed in every spelling an attacker may use, normalized and matched
// against the rules, as the egress proxy does for each connection.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "network/address.h"
#include "network/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  std::string_view input = fuzz::AsText(data, size);
  size_t eol = input.find('\n');
  std::string_view host = input.substr(0, eol);
  std::string_view rules = eol == std::string_view::npos ? "" : input.substr(eol + 1);

  auto literal = network::ParseIpLiteral(host);
  if (literal) {
    static_cast<void>(network::RefusedCategory(*literal));
    static_cast<void>(network::Unmapped(*literal));
  }
  auto cidr = network::ParseCidr(host);
  if (cidr.ok()) {
    static_cast<void>(network::RefusedCategory(*cidr));
    auto again = network::ParseCidr(cidr->ToString());
    if (!again.ok() || !(*again == *cidr)) __builtin_trap();  // a range must read back as itself
    if (literal) static_cast<void>(cidr->Contains(*literal));
  }
  auto normalized = network::NormalizeHost(host);

  nlohmann::json body = nlohmann::json::parse(rules, nullptr, false);
  if (body.is_discarded()) return 0;
  network::PolicyError error;
  auto policy = network::ParsePolicy(body, "network", &error);
  if (!policy) return 0;
  // A parsed policy must parse again, unchanged, from its own JSON.
  auto again = network::ParsePolicy(policy->ToJson(), "network", &error);
  if (!again || !(*again == *policy)) __builtin_trap();
  network::Matcher matcher(*policy);
  if (normalized.ok() && !literal) static_cast<void>(matcher.CheckName(*normalized));
  if (literal) {
    static_cast<void>(
        matcher.Check(normalized.ok() ? *normalized : std::string(host), *literal, {*literal}));
  }
  return 0;
}
