// Egress policy parsing and per-connection verdicts (src/network/policy.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "network/policy.h"

namespace kiln::network {
namespace network_policy_test {
namespace {

using nlohmann::json;

Policy Parse(const json& body) {
  PolicyError error;
  std::optional<Policy> p = ParsePolicy(body, "network", &error);
  EXPECT_TRUE(p.has_value()) << body.dump() << ": " << error.path << ": " << error.message;
  return p.value_or(Policy{});
}

PolicyError ParseError(const json& body, std::string_view path = "network") {
  PolicyError error;
  EXPECT_FALSE(ParsePolicy(body, path, &error).has_value()) << body.dump();
  return error;
}

// The error for a single allow (or deny) entry.
PolicyError EntryError(const std::string& entry, const char* list = "allow") {
  return ParseError({{"internet", true}, {list, {entry}}});
}

Address Ip(std::string_view text) {
  std::optional<Address> a = ParseIpLiteral(text);
  EXPECT_TRUE(a.has_value()) << text;
  return a.value_or(Address{});
}

constexpr char kAlwaysRefused[] =
    "; private, loopback, link-local and metadata addresses are always refused";
constexpr char kAccepted[] =
    "give a domain (example.com), a wildcard (*.example.com), an IP address or a CIDR range "
    "(203.0.113.0/24)";

TEST(NetworkPolicyTest, ParseDefaultsAndJson) {
  Policy empty = Parse(json::object());
  EXPECT_FALSE(empty.internet);
  EXPECT_TRUE(empty.allow.empty());
  EXPECT_TRUE(empty.deny.empty());
  EXPECT_EQ(empty.ToJson(), json::parse(R"({"internet":false,"allow":[],"deny":[]})"));

  Policy on = Parse({{"internet", true}});
  EXPECT_TRUE(on.internet);
  EXPECT_EQ(on.ToJson().dump(), R"({"allow":[],"deny":[],"internet":true})");

  Policy p = Parse(json::parse(
      R"({"internet": true, "allow": ["example.com", "*.example.org"], "deny": ["10.0.0.0/8"]})"));
  EXPECT_EQ(p.ToJson(), json::parse(R"({"internet": true, "allow": ["example.com",
      "*.example.org"], "deny": ["10.0.0.0/8"]})"));
  EXPECT_EQ(Parse(p.ToJson()), p);  // what GET shows, PUT takes back
}

TEST(NetworkPolicyTest, EntriesAreNormalized) {
  Policy p = Parse(json::parse(R"({"internet": true, "allow": [
      "Example.COM.", "*.Foo.Example.com", "*.com", "203.0.113.77/24", "0xcb.0.113.5",
      "[2001:DB8::1]", "2001:db8::/32", "::ffff:198.51.100.1", "::ffff:198.51.100.0/120",
      "_dmarc.example.net"]})"));
  EXPECT_EQ(p.allow,
            (std::vector<std::string>{"example.com", "*.foo.example.com", "*.com", "203.0.113.0/24",
                                      "203.0.113.5", "2001:db8::1", "2001:db8::/32", "198.51.100.1",
                                      "198.51.100.0/24", "_dmarc.example.net"}));
}

TEST(NetworkPolicyTest, DuplicatesAreDroppedAfterNormalizing) {
  Policy p = Parse(json::parse(R"({"allow": ["b.com", "a.com", "A.com", "a.com.", "b.com",
      "203.0.113.5", "3405803781", "203.0.113.5/32", "203.0.113.9/32"],
      "deny": ["x.com", "X.COM"]})"));
  EXPECT_EQ(p.allow, (std::vector<std::string>{"b.com", "a.com", "203.0.113.5", "203.0.113.5/32",
                                               "203.0.113.9/32"}));
  EXPECT_EQ(p.deny, (std::vector<std::string>{"x.com"}));
}

TEST(NetworkPolicyTest, DenyMayNameRefusedAddresses) {
  Policy p = Parse(json::parse(
      R"({"deny": ["10.0.0.5", "192.168.0.0/16", "127.0.0.1", "169.254.169.254", "[::1]"]})"));
  EXPECT_EQ(p.deny, (std::vector<std::string>{"10.0.0.5", "192.168.0.0/16", "127.0.0.1",
                                              "169.254.169.254", "::1"}));
}

TEST(NetworkPolicyTest, AllowRangesThatAreOnlyPartlyRefusedAreAccepted) {
  Policy p = Parse(json::parse(R"({"allow": ["10.0.0.0/7", "0.0.0.0/0", "::/0"]})"));
  EXPECT_EQ(p.allow, (std::vector<std::string>{"10.0.0.0/7", "0.0.0.0/0", "::/0"}));
}

TEST(NetworkPolicyTest, BodyShapeErrors) {
  PolicyError e = ParseError(json::array());
  EXPECT_EQ(e.path, "network");
  EXPECT_EQ(e.message, "must be an object with internet, allow and deny");
  e = ParseError("internet", "");
  EXPECT_EQ(e.path, "");

  e = ParseError({{"internet", true}, {"proxy", "x"}});
  EXPECT_EQ(e.path, "network.proxy");
  EXPECT_EQ(e.message, "is not a known member; accepted: internet, allow, deny");
  e = ParseError({{"Internet", true}}, "");
  EXPECT_EQ(e.path, "Internet");

  e = ParseError({{"internet", "yes"}});
  EXPECT_EQ(e.path, "network.internet");
  EXPECT_EQ(e.message, "must be true or false");
  EXPECT_EQ(ParseError({{"internet", nullptr}}, "").path, "internet");
  EXPECT_EQ(ParseError({{"internet", 1}}, "").path, "internet");

  e = ParseError({{"allow", "example.com"}});
  EXPECT_EQ(e.path, "network.allow");
  EXPECT_EQ(e.message, "must be an array of strings");
  EXPECT_EQ(ParseError({{"deny", nullptr}}, "").path, "deny");
  EXPECT_EQ(ParseError({{"deny", json::object()}}, "").path, "deny");

  e = ParseError(json::parse(R"({"allow": ["a.com", "b.com", 3]})"), "");
  EXPECT_EQ(e.path, "allow[2]");
  EXPECT_EQ(e.message, "must be a string");
  e = ParseError(json::parse(R"({"allow": ["a.com"], "deny": ["b.com", null]})"));
  EXPECT_EQ(e.path, "network.deny[1]");
}

TEST(NetworkPolicyTest, ConnectIsRefused) {
  PolicyError e =
      ParseError(json::parse(R"({"internet": true, "connect": ["db.example.com:5432"]})"));
  EXPECT_EQ(e.path, "network.connect");
  EXPECT_EQ(e.message,
            "is not supported by kiln: rules apply to every port of a host; use allow and deny");
  EXPECT_EQ(ParseError({{"connect", "x"}}, "").path, "connect");
  // An empty list asks for nothing kiln lacks.
  EXPECT_EQ(Parse(json::parse(R"({"internet": true, "connect": []})")), Policy{.internet = true});
}

TEST(NetworkPolicyTest, AtMost256EntriesEach) {
  json allow = json::array();
  for (int i = 0; i < 256; ++i) allow.push_back("h" + std::to_string(i) + ".example.com");
  EXPECT_EQ(Parse({{"allow", allow}, {"deny", allow}}).allow.size(), 256u);
  allow.push_back("one-more.example.com");
  PolicyError e = ParseError({{"allow", allow}});
  EXPECT_EQ(e.path, "network.allow");
  EXPECT_EQ(e.message, "has 257 entries; at most 256 are accepted");
  EXPECT_EQ(ParseError({{"deny", allow}}, "").path, "deny");
}

TEST(NetworkPolicyTest, EntryErrors) {
  struct Bad {
    std::string entry;
    std::string message;
  };
  const std::vector<Bad> cases = {
      {"", "is empty; " + std::string(kAccepted)},
      {"*",
       "'*' alone is not accepted: to allow every host, set internet: true with no allow "
       "list"},
      {"https://example.com/", "'https://example.com/' is a URL; " + std::string(kAccepted)},
      {"example.com:443",
       "'example.com:443' is not a valid host (ports are not accepted); " + std::string(kAccepted)},
      {"203.0.113.5:443",
       "'203.0.113.5:443' is not a valid host (ports are not accepted); " + std::string(kAccepted)},
      {"[2001:db8::1]:443", "'[2001:db8::1]:443' is not a valid host (ports are not accepted); " +
                                std::string(kAccepted)},
      {"*.*.example.com",
       "'*.*.example.com' is not a valid wildcard; a wildcard is '*.' and a domain"},
      {"*.203.0.113", "'*.203.0.113' is not a valid wildcard; a wildcard is '*.' and a domain"},
      {"*.[::1]", "'*.[::1]' is not a valid wildcard; a wildcard is '*.' and a domain"},
      {"*.", "'*.' is not a valid wildcard: the domain after '*.' is empty"},
      {"*.exa mple.com",
       "'*.exa mple.com' is not a valid wildcard: the domain after '*.' contains whitespace"},
      {"foo.*.com", "'foo.*.com': '*' is only accepted as the whole first label (*.example.com)"},
      {"*example.com",
       "'*example.com': '*' is only accepted as the whole first label (*.example.com)"},
      {"example.*", "'example.*': '*' is only accepted as the whole first label (*.example.com)"},
      {"10.0.0.0/33",
       "'10.0.0.0/33' is not a valid CIDR range: prefix length must be a number from 0 to 32"},
      {"10.1/8",
       "'10.1/8' is not a valid CIDR range: '10.1' is not a dotted-quad IPv4 or an IPv6 address"},
      {"example.com/path",
       "'example.com/path' is not a valid CIDR range: 'example.com' is not a "
       "dotted-quad IPv4 or an IPv6 address"},
      {"user@example.com", "'user@example.com' is not a valid host: it contains '@'"},
      {"exa mple.com", "'exa mple.com' is not a valid host: it contains whitespace"},
      {"0x7g.0.0.1",
       "'0x7g.0.0.1' is not a valid host: it ends in a number but is not a valid IPv4 address"},
      {"a..b", "'a..b' is not a valid host: it has an empty label"},
      {"fe80::1%eth0",
       "'fe80::1%eth0' is not a valid host: it contains '%' (zone ids and URL "
       "escapes are not accepted)"},
      // Allow entries that could never take effect.
      {"10.0.0.5", "'10.0.0.5' is a private address" + std::string(kAlwaysRefused)},
      {"192.168.0.0/16",
       "'192.168.0.0/16' is a private address range" + std::string(kAlwaysRefused)},
      {"127.0.0.1", "'127.0.0.1' is a loopback address" + std::string(kAlwaysRefused)},
      {"0x7f000001", "'0x7f000001' is a loopback address" + std::string(kAlwaysRefused)},
      {"[::ffff:10.0.0.1]",
       "'[::ffff:10.0.0.1]' is a private address" + std::string(kAlwaysRefused)},
      {"169.254.169.254",
       "'169.254.169.254' is a link-local address" + std::string(kAlwaysRefused)},
      {"fd00:ec2::254", "'fd00:ec2::254' is a metadata address" + std::string(kAlwaysRefused)},
      {"100.100.100.200", "'100.100.100.200' is a metadata address" + std::string(kAlwaysRefused)},
      {"0.0.0.0", "'0.0.0.0' is an unspecified address" + std::string(kAlwaysRefused)},
      {"224.0.0.0/4", "'224.0.0.0/4' is a multicast address range" + std::string(kAlwaysRefused)},
      {"fe80::/64", "'fe80::/64' is a link-local address range" + std::string(kAlwaysRefused)},
      {"64:ff9b::a00:1", "'64:ff9b::a00:1' is a private address" + std::string(kAlwaysRefused)},
  };
  for (const Bad& c : cases) {
    PolicyError e = EntryError(c.entry);
    EXPECT_EQ(e.path, "network.allow[0]") << c.entry;
    EXPECT_EQ(e.message, c.message) << c.entry;
  }
  PolicyError e = EntryError("*", "deny");
  EXPECT_EQ(e.path, "network.deny[0]");
  EXPECT_EQ(e.message, "'*' alone is not accepted: to refuse every host, set internet: false");
  EXPECT_EQ(EntryError("https://x/", "deny").path, "network.deny[0]");
}

TEST(NetworkPolicyTest, FirstBadEntryIsReported) {
  PolicyError e = ParseError(json::parse(R"({"allow": ["a.com", "b.com", "c.com:80", "*"]})"), "");
  EXPECT_EQ(e.path, "allow[2]");
  EXPECT_EQ(e.message,
            "'c.com:80' is not a valid host (ports are not accepted); " + std::string(kAccepted));
}

TEST(NetworkPolicyTest, VerdictNames) {
  EXPECT_EQ(VerdictName(Verdict::kAllowed), "allowed");
  EXPECT_EQ(VerdictName(Verdict::kInternetOff), "internet-off");
  EXPECT_EQ(VerdictName(Verdict::kNotAllowed), "not-allowed");
  EXPECT_EQ(VerdictName(Verdict::kDenied), "denied");
  EXPECT_EQ(VerdictName(Verdict::kPrivateAddress), "private-address");
}

// A Matcher for a policy written as the API's JSON.
Matcher Compile(std::string_view body) { return Matcher(Parse(json::parse(body))); }

const Address kPublic = Address::V4(203, 0, 113, 10);
const std::vector<Address> kNoOwn;

TEST(NetworkPolicyMatcherTest, InternetOffRefusesEverything) {
  for (std::string_view body :
       {R"({})", R"({"internet": false, "allow": ["example.com", "203.0.113.0/24"]})"}) {
    Matcher m = Compile(body);
    EXPECT_EQ(m.CheckName("example.com"), Verdict::kInternetOff) << body;
    EXPECT_EQ(m.CheckName("other.org"), Verdict::kInternetOff) << body;
    EXPECT_EQ(m.Check("example.com", kPublic, kNoOwn), Verdict::kInternetOff) << body;
    EXPECT_EQ(m.Check("203.0.113.10", kPublic, kNoOwn), Verdict::kInternetOff) << body;
    EXPECT_EQ(m.Check("localhost", Ip("127.0.0.1"), kNoOwn), Verdict::kInternetOff) << body;
  }
}

TEST(NetworkPolicyMatcherTest, InternetOnWithNoAllowAllowsPublicAddresses) {
  Matcher m = Compile(R"({"internet": true})");
  EXPECT_EQ(m.CheckName("example.com"), std::nullopt);
  EXPECT_EQ(m.Check("example.com", kPublic, kNoOwn), Verdict::kAllowed);
  EXPECT_EQ(m.Check("2001:db8::1", Ip("2001:db8::1"), kNoOwn), Verdict::kAllowed);
  EXPECT_EQ(m.Check("example.com", Ip("10.0.0.1"), kNoOwn), Verdict::kPrivateAddress);
  EXPECT_EQ(m.Check("metadata", Ip("169.254.169.254"), kNoOwn), Verdict::kPrivateAddress);
  EXPECT_EQ(m.Check("metadata", Ip("fd00:ec2::254"), kNoOwn), Verdict::kPrivateAddress);
  EXPECT_EQ(m.Check("x.com", Ip("[64:ff9b::a00:1]"), kNoOwn), Verdict::kPrivateAddress);
}

TEST(NetworkPolicyMatcherTest, AllowDomainIsExact) {
  Matcher m = Compile(R"({"internet": true, "allow": ["example.com"]})");
  EXPECT_EQ(m.CheckName("example.com"), std::nullopt);
  EXPECT_EQ(m.CheckName("www.example.com"), Verdict::kNotAllowed);
  EXPECT_EQ(m.CheckName("evilexample.com"), Verdict::kNotAllowed);
  EXPECT_EQ(m.CheckName("example.com.evil.org"), Verdict::kNotAllowed);
  EXPECT_EQ(m.CheckName("com"), Verdict::kNotAllowed);
  EXPECT_EQ(m.Check("example.com", kPublic, kNoOwn), Verdict::kAllowed);
  EXPECT_EQ(m.Check("www.example.com", kPublic, kNoOwn), Verdict::kNotAllowed);
  EXPECT_EQ(m.Check("203.0.113.10", kPublic, kNoOwn), Verdict::kNotAllowed);
  // An allowed name that resolves to a private address is still refused.
  EXPECT_EQ(m.Check("example.com", Ip("127.0.0.1"), kNoOwn), Verdict::kPrivateAddress);
}

TEST(NetworkPolicyMatcherTest, AllowWildcardMatchesSubdomainsOnly) {
  Matcher m = Compile(R"({"internet": true, "allow": ["*.example.com"]})");
  EXPECT_EQ(m.CheckName("api.example.com"), std::nullopt);
  EXPECT_EQ(m.CheckName("a.b.c.example.com"), std::nullopt);
  EXPECT_EQ(m.CheckName("example.com"), Verdict::kNotAllowed);
  EXPECT_EQ(m.CheckName("evilexample.com"), Verdict::kNotAllowed);
  EXPECT_EQ(m.CheckName("api.evilexample.com"), Verdict::kNotAllowed);
  EXPECT_EQ(m.CheckName("example.com.evil.org"), Verdict::kNotAllowed);
  EXPECT_EQ(m.Check("api.example.com", kPublic, kNoOwn), Verdict::kAllowed);
  EXPECT_EQ(m.Check("a.b.c.example.com", kPublic, kNoOwn), Verdict::kAllowed);
  EXPECT_EQ(m.Check("example.com", kPublic, kNoOwn), Verdict::kNotAllowed);
  EXPECT_EQ(m.Check("evilexample.com", kPublic, kNoOwn), Verdict::kNotAllowed);
}

TEST(NetworkPolicyMatcherTest, AllowDomainAndWildcardTogether) {
  Matcher m = Compile(R"({"internet": true, "allow": ["example.com", "*.example.com", "*.org"]})");
  EXPECT_EQ(m.CheckName("example.com"), std::nullopt);
  EXPECT_EQ(m.CheckName("www.example.com"), std::nullopt);
  EXPECT_EQ(m.CheckName("wikipedia.org"), std::nullopt);
  EXPECT_EQ(m.CheckName("org"), Verdict::kNotAllowed);
  EXPECT_EQ(m.CheckName("example.net"), Verdict::kNotAllowed);
}

TEST(NetworkPolicyMatcherTest, DenyBeatsAllow) {
  Matcher wildcard_deny = Compile(
      R"({"internet": true, "allow": ["api.example.com", "*.example.org"],
          "deny": ["*.example.com", "example.org"]})");
  EXPECT_EQ(wildcard_deny.CheckName("api.example.com"), Verdict::kDenied);
  EXPECT_EQ(wildcard_deny.Check("api.example.com", kPublic, kNoOwn), Verdict::kDenied);
  EXPECT_EQ(wildcard_deny.CheckName("www.example.org"), std::nullopt);
  EXPECT_EQ(wildcard_deny.Check("www.example.org", kPublic, kNoOwn), Verdict::kAllowed);

  Matcher domain_deny =
      Compile(R"({"internet": true, "allow": ["*.example.com"], "deny": ["secret.example.com"]})");
  EXPECT_EQ(domain_deny.CheckName("secret.example.com"), Verdict::kDenied);
  EXPECT_EQ(domain_deny.Check("secret.example.com", kPublic, kNoOwn), Verdict::kDenied);
  EXPECT_EQ(domain_deny.CheckName("x.secret.example.com"), std::nullopt);
  EXPECT_EQ(domain_deny.CheckName("public.example.com"), std::nullopt);

  Matcher same = Compile(R"({"internet": true, "allow": ["x.com"], "deny": ["x.com"]})");
  EXPECT_EQ(same.CheckName("x.com"), Verdict::kDenied);
}

TEST(NetworkPolicyMatcherTest, DenyWithoutAllowOnlyRefusesTheDenied) {
  Matcher m = Compile(R"({"internet": true, "deny": ["*.tracker.net", "ads.example.com"]})");
  EXPECT_EQ(m.CheckName("a.tracker.net"), Verdict::kDenied);
  EXPECT_EQ(m.CheckName("ads.example.com"), Verdict::kDenied);
  EXPECT_EQ(m.CheckName("tracker.net"), std::nullopt);
  EXPECT_EQ(m.CheckName("example.com"), std::nullopt);
  EXPECT_EQ(m.Check("example.com", kPublic, kNoOwn), Verdict::kAllowed);
}

TEST(NetworkPolicyMatcherTest, DenyRangeBeatsAllowByName) {
  Matcher m = Compile(
      R"({"internet": true, "allow": ["example.com"], "deny": ["203.0.113.0/24", "2001:db8::1"]})");
  EXPECT_EQ(m.CheckName("example.com"), std::nullopt);  // only the address can tell
  EXPECT_EQ(m.Check("example.com", Ip("203.0.113.77"), kNoOwn), Verdict::kDenied);
  EXPECT_EQ(m.Check("example.com", Ip("2001:db8::1"), kNoOwn), Verdict::kDenied);
  EXPECT_EQ(m.Check("example.com", Ip("2001:db8::2"), kNoOwn), Verdict::kAllowed);
  EXPECT_EQ(m.Check("example.com", Ip("198.51.100.1"), kNoOwn), Verdict::kAllowed);
  // Deny is checked before the refused ranges: the verdict names the rule that hit.
  Matcher private_deny = Compile(R"({"internet": true, "deny": ["10.0.0.0/8"]})");
  EXPECT_EQ(private_deny.Check("x.com", Ip("10.1.1.1"), kNoOwn), Verdict::kDenied);
  EXPECT_EQ(private_deny.Check("x.com", Ip("192.168.1.1"), kNoOwn), Verdict::kPrivateAddress);
}

TEST(NetworkPolicyMatcherTest, AllowRangeMatchesTheAddressOfAName) {
  Matcher m = Compile(R"({"internet": true, "allow": ["203.0.113.0/24", "2001:db8::/32"]})");
  // The name says nothing; the address decides.
  EXPECT_EQ(m.CheckName("anything.example"), std::nullopt);
  EXPECT_EQ(m.Check("anything.example", Ip("203.0.113.200"), kNoOwn), Verdict::kAllowed);
  EXPECT_EQ(m.Check("anything.example", Ip("2001:db8:1::5"), kNoOwn), Verdict::kAllowed);
  EXPECT_EQ(m.Check("anything.example", Ip("198.51.100.1"), kNoOwn), Verdict::kNotAllowed);
  EXPECT_EQ(m.Check("203.0.113.5", Ip("203.0.113.5"), kNoOwn), Verdict::kAllowed);
}

TEST(NetworkPolicyMatcherTest, AllowIpMatchesThatAddressOnly) {
  Matcher m = Compile(R"({"internet": true, "allow": ["0xcb.0.113.5", "[2001:db8::7]"]})");
  EXPECT_EQ(m.Check("203.0.113.5", Ip("203.0.113.5"), kNoOwn), Verdict::kAllowed);
  EXPECT_EQ(m.Check("203.0.113.6", Ip("203.0.113.6"), kNoOwn), Verdict::kNotAllowed);
  EXPECT_EQ(m.Check("2001:db8::7", Ip("2001:db8::7"), kNoOwn), Verdict::kAllowed);
  // The address of a hand-built mapped v6 is compared as v4.
  Address mapped;
  mapped.v6 = true;
  mapped.bytes[10] = mapped.bytes[11] = 0xff;
  mapped.bytes[12] = 203;
  mapped.bytes[14] = 113;
  mapped.bytes[15] = 5;
  EXPECT_EQ(m.Check("203.0.113.5", mapped, kNoOwn), Verdict::kAllowed);
}

TEST(NetworkPolicyMatcherTest, OwnAddressesAreRefused) {
  Matcher m = Compile(R"({"internet": true})");
  const std::vector<Address> own = {Ip("198.51.100.20"), Ip("2001:db8::20")};
  EXPECT_EQ(m.Check("host.example", Ip("198.51.100.20"), own), Verdict::kPrivateAddress);
  EXPECT_EQ(m.Check("198.51.100.20", Ip("::ffff:198.51.100.20"), own), Verdict::kPrivateAddress);
  EXPECT_EQ(m.Check("host.example", Ip("2001:db8::20"), own), Verdict::kPrivateAddress);
  EXPECT_EQ(m.Check("host.example", Ip("198.51.100.21"), own), Verdict::kAllowed);
  // Even an explicit allow does not reach the host itself.
  Matcher allowed = Compile(R"({"internet": true, "allow": ["198.51.100.20", "host.example"]})");
  EXPECT_EQ(allowed.Check("host.example", Ip("198.51.100.20"), own), Verdict::kPrivateAddress);
}

TEST(NetworkPolicyMatcherTest, CheckNameDefersToDnsOnlyWhenNeeded) {
  // Names only: nothing to resolve for a name outside allow.
  Matcher names = Compile(R"({"internet": true, "allow": ["a.com", "*.b.com"]})");
  EXPECT_EQ(names.CheckName("c.com"), Verdict::kNotAllowed);
  EXPECT_EQ(names.CheckName("a.com"), std::nullopt);
  EXPECT_EQ(names.CheckName("x.b.com"), std::nullopt);
  // A deny range does not stop a lookup: only the address can match it.
  Matcher deny_range = Compile(R"({"internet": true, "allow": ["a.com"], "deny": ["1.2.3.4"]})");
  EXPECT_EQ(deny_range.CheckName("c.com"), Verdict::kNotAllowed);
  EXPECT_EQ(deny_range.CheckName("a.com"), std::nullopt);
  // An allow range needs the address of any name.
  Matcher with_range = Compile(R"({"internet": true, "allow": ["a.com", "198.51.100.0/24"]})");
  EXPECT_EQ(with_range.CheckName("c.com"), std::nullopt);
  // No allow list: every name not denied is resolved.
  EXPECT_EQ(Compile(R"({"internet": true})").CheckName("c.com"), std::nullopt);
}

}  // namespace
}  // namespace network_policy_test
}  // namespace kiln::network
