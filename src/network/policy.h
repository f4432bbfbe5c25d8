// A sandbox's egress policy: parsing the API's rules and deciding each connection.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "network/address.h"
#include "network/internal_endpoints.h"

namespace kiln::network {

// The rules as the API carries them: {"internet": bool, "allow": [..], "deny": [..]}.
struct Policy {
  bool internet = false;
  std::vector<std::string> allow;  // normalized entries, order kept, duplicates removed
  std::vector<std::string> deny;
  nlohmann::json ToJson() const;  // {"internet":..,"allow":[..],"deny":[..]}
  bool operator==(const Policy&) const = default;
};

struct PolicyError {
  std::string path;  // e.g. "network.allow[2]"
  std::string message;
};

// At most this many entries in each of allow and deny.
inline constexpr size_t kMaxPolicyEntries = 256;

// Parses and validates `body`. `path` prefixes error paths ("network" for a create body
// gives "network.allow[2]"; "" for a PUT body gives "allow[2]"). "internet" is optional
// (default false): whether it is required is the caller's decision. Entries of allow and
// deny are domains ("example.com"), wildcards ("*.example.com"), IP literals (any
// spelling ParseIpLiteral reads, stored canonical) or CIDRs (stored with the base
// masked). An allow entry wholly inside an always-refused range is an error, as it could
// never take effect; "connect" is refused (kiln has no port rules).
std::optional<Policy> ParsePolicy(const nlohmann::json& body, std::string_view path,
                                  PolicyError* error);

enum class Verdict { kAllowed, kInternetOff, kNotAllowed, kDenied, kPrivateAddress };
// "allowed", "internet-off", "not-allowed", "denied", "private-address".
std::string_view VerdictName(Verdict v);

// A Policy compiled for checks: names, wildcards and address ranges apart.
class Matcher {
 public:
  explicit Matcher(const Policy& p);

  // Before resolving `host` (normalized, not an IP literal): a refusal that needs no DNS
  // lookup, or nullopt when the name must be resolved and its address checked. DNS
  // queries leak data, so none is made for a name the policy refuses anyway.
  std::optional<Verdict> CheckName(std::string_view host) const;

  // The verdict for dialling `addr` for `host` (the name, or the literal's canonical text
  // when the client gave an IP); `own` are the host's own addresses.
  Verdict Check(std::string_view host, const Address& addr, const std::vector<Address>& own) const;
  // As above for `port`, the operator's internal endpoints let through
  // where this policy reaches them (ReachesInternal).
  Verdict Check(std::string_view host, const Address& addr, int port,
                const std::vector<Address>& own, const InternalEndpoints& internal) const;
  // Whether this policy reaches `e` as it would a public host of its name:
  // internet on, neither its name nor its address denied, and the allow
  // list empty or naming it.
  bool ReachesInternal(const InternalEndpoint& e) const;

 private:
  struct Rules {
    std::set<std::string, std::less<>> names;     // "example.com"
    std::set<std::string, std::less<>> suffixes;  // ".example.com" for "*.example.com"
    std::vector<Cidr> ranges;                     // IPs as /32 and /128
    bool MatchesName(std::string_view host) const;
    bool MatchesAddress(const Address& a) const;
  };

  bool internet_;
  Rules allow_;
  Rules deny_;
  bool allow_empty_;
};

}  // namespace kiln::network
