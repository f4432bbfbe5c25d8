#include "network/policy.h"

#include <algorithm>

namespace kiln::network {
namespace {

using nlohmann::json;

constexpr std::string_view kAccepted =
    "give a domain (example.com), a wildcard (*.example.com), an IP address or a CIDR range "
    "(203.0.113.0/24)";

std::string Join(std::string_view path, std::string_view member) {
  std::string out(path);
  if (!out.empty()) out += '.';
  return out.append(member);
}

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

// The message for an allow entry that could never take effect.
std::string RefusedMessage(std::string_view entry, const std::string& category, bool range) {
  std::string article = category == "unspecified" ? "an " : "a ";
  return Quote(entry) + " is " + article + category + (range ? " address range" : " address") +
         "; private, loopback, link-local and metadata addresses are always refused";
}

// The normalized form of one allow/deny entry, or nullopt with *why.
std::optional<std::string> NormalizeEntry(std::string_view entry, bool allow, std::string* why) {
  auto fail = [why](std::string message) -> std::optional<std::string> {
    *why = std::move(message);
    return std::nullopt;
  };
  if (entry.empty()) return fail("is empty; " + std::string(kAccepted));
  if (entry == "*") {
    return fail(allow ? "'*' alone is not accepted: to allow every host, set internet: true "
                        "with no allow list"
                      : "'*' alone is not accepted: to refuse every host, set internet: false");
  }
  if (entry.find("://") != std::string_view::npos) {
    return fail(Quote(entry) + " is a URL; " + std::string(kAccepted));
  }
  if (entry.substr(0, 2) == "*.") {
    std::string_view rest = entry.substr(2);
    if (rest.find('*') == std::string_view::npos && !ParseIpLiteral(rest) &&
        rest.find(':') == std::string_view::npos) {
      auto host = NormalizeHost(rest);
      if (host.ok()) return "*." + *host;
      return fail(Quote(entry) + " is not a valid wildcard: the domain after '*.' " +
                  host.status().message());
    }
    return fail(Quote(entry) + " is not a valid wildcard; a wildcard is '*.' and a domain");
  }
  if (entry.find('*') != std::string_view::npos) {
    return fail(Quote(entry) + ": '*' is only accepted as the whole first label (*.example.com)");
  }
  if (entry.find('/') != std::string_view::npos) {
    auto cidr = ParseCidr(entry);
    if (!cidr.ok())
      return fail(Quote(entry) + " is not a valid CIDR range: " + cidr.status().message());
    std::string category = RefusedCategory(*cidr);
    if (allow && !category.empty()) return fail(RefusedMessage(entry, category, true));
    return cidr->ToString();
  }
  if (std::optional<Address> ip = ParseIpLiteral(entry)) {
    std::string category = RefusedCategory(*ip);
    if (allow && !category.empty()) return fail(RefusedMessage(entry, category, false));
    return ip->ToString();
  }
  // host:port, [v6]:port; a zone id ('%') gets NormalizeHost's more precise message.
  if (entry.find(':') != std::string_view::npos && entry.find('%') == std::string_view::npos) {
    return fail(Quote(entry) + " is not a valid host (ports are not accepted); " +
                std::string(kAccepted));
  }
  auto host = NormalizeHost(entry);
  if (!host.ok()) return fail(Quote(entry) + " is not a valid host: it " + host.status().message());
  return *host;
}

// Parses body[member] into *out (normalized, duplicates dropped); false with *error.
bool ParseList(const json& body, std::string_view member, std::string_view path,
               std::vector<std::string>* out, PolicyError* error) {
  auto it = body.find(member);
  if (it == body.end()) return true;
  std::string where = Join(path, member);
  if (!it->is_array()) {
    *error = {where, "must be an array of strings"};
    return false;
  }
  if (it->size() > kMaxPolicyEntries) {
    *error = {where, "has " + std::to_string(it->size()) + " entries; at most " +
                         std::to_string(kMaxPolicyEntries) + " are accepted"};
    return false;
  }
  for (size_t i = 0; i < it->size(); ++i) {
    std::string at = where + "[" + std::to_string(i) + "]";
    const json& entry = (*it)[i];
    if (!entry.is_string()) {
      *error = {at, "must be a string"};
      return false;
    }
    std::string why;
    std::optional<std::string> norm =
        NormalizeEntry(entry.get_ref<const std::string&>(), member == "allow", &why);
    if (!norm) {
      *error = {at, why};
      return false;
    }
    if (std::find(out->begin(), out->end(), *norm) == out->end()) out->push_back(*norm);
  }
  return true;
}

}  // namespace

json Policy::ToJson() const { return {{"internet", internet}, {"allow", allow}, {"deny", deny}}; }

std::optional<Policy> ParsePolicy(const json& body, std::string_view path, PolicyError* error) {
  if (!body.is_object()) {
    *error = {std::string(path), "must be an object with internet, allow and deny"};
    return std::nullopt;
  }
  for (const auto& [key, value] : body.items()) {
    if (key == "internet" || key == "allow" || key == "deny") continue;
    // The reference API's host:port rules; an empty list asks for nothing kiln lacks.
    if (key == "connect") {
      if (value.is_array() && value.empty()) continue;
      *error = {Join(path, key),
                "is not supported by kiln: rules apply to every port of a host; use allow and "
                "deny"};
      return std::nullopt;
    }
    *error = {Join(path, key), "is not a known member; accepted: internet, allow, deny"};
    return std::nullopt;
  }
  Policy policy;
  if (auto it = body.find("internet"); it != body.end()) {
    if (!it->is_boolean()) {
      *error = {Join(path, "internet"), "must be true or false"};
      return std::nullopt;
    }
    policy.internet = it->get<bool>();
  }
  if (!ParseList(body, "allow", path, &policy.allow, error) ||
      !ParseList(body, "deny", path, &policy.deny, error)) {
    return std::nullopt;
  }
  return policy;
}

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kAllowed:
      return "allowed";
    case Verdict::kInternetOff:
      return "internet-off";
    case Verdict::kNotAllowed:
      return "not-allowed";
    case Verdict::kDenied:
      return "denied";
    case Verdict::kPrivateAddress:
      return "private-address";
  }
  return "unknown";
}

bool Matcher::Rules::MatchesName(std::string_view host) const {
  if (names.contains(host)) return true;
  // "*.example.com" is kept as ".example.com": try every suffix that starts at a dot.
  for (size_t dot = host.find('.'); dot != std::string_view::npos; dot = host.find('.', dot + 1)) {
    if (suffixes.contains(host.substr(dot))) return true;
  }
  return false;
}

bool Matcher::Rules::MatchesAddress(const Address& a) const {
  return std::any_of(ranges.begin(), ranges.end(), [&a](const Cidr& c) { return c.Contains(a); });
}

Matcher::Matcher(const Policy& p) : internet_(p.internet), allow_empty_(p.allow.empty()) {
  // Entries are as ParsePolicy leaves them; one that does not parse matches nothing.
  auto compile = [](const std::vector<std::string>& entries, Rules* rules) {
    for (const std::string& e : entries) {
      if (e.starts_with("*.")) {
        rules->suffixes.insert(e.substr(1));
      } else if (e.find('/') != std::string::npos) {
        if (auto c = ParseCidr(e); c.ok()) rules->ranges.push_back(*c);
      } else if (auto ip = ParseIpLiteral(e)) {
        rules->ranges.push_back(Cidr{*ip, ip->v6 ? 128 : 32});
      } else {
        rules->names.insert(e);
      }
    }
  };
  compile(p.allow, &allow_);
  compile(p.deny, &deny_);
}

std::optional<Verdict> Matcher::CheckName(std::string_view host) const {
  if (!internet_) return Verdict::kInternetOff;
  if (deny_.MatchesName(host)) return Verdict::kDenied;
  // With address rules in allow, only the resolved address can tell.
  if (!allow_empty_ && !allow_.MatchesName(host) && allow_.ranges.empty()) {
    return Verdict::kNotAllowed;
  }
  return std::nullopt;
}

Verdict Matcher::Check(std::string_view host, const Address& addr,
                       const std::vector<Address>& own) const {
  Address a = Unmapped(addr);
  if (!internet_) return Verdict::kInternetOff;
  if (deny_.MatchesName(host) || deny_.MatchesAddress(a)) return Verdict::kDenied;
  bool is_own =
      std::any_of(own.begin(), own.end(), [&a](const Address& o) { return Unmapped(o) == a; });
  if (is_own || !RefusedCategory(a).empty()) return Verdict::kPrivateAddress;
  if (!allow_empty_ && !allow_.MatchesName(host) && !allow_.MatchesAddress(a)) {
    return Verdict::kNotAllowed;
  }
  return Verdict::kAllowed;
}

Verdict Matcher::Check(std::string_view host, const Address& addr, int port,
                       const std::vector<Address>& own, const InternalEndpoints& internal) const {
  Verdict v = Check(host, addr, own);
  if (v != Verdict::kPrivateAddress) return v;
  const InternalEndpoint* e = internal.At(addr, port);
  return e && ReachesInternal(*e) ? Verdict::kAllowed : v;
}

bool Matcher::ReachesInternal(const InternalEndpoint& e) const {
  if (!internet_ || deny_.MatchesName(e.name) || deny_.MatchesAddress(e.address)) return false;
  return allow_empty_ || allow_.MatchesName(e.name);
}

}  // namespace kiln::network
