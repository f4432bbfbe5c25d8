// IP literals, host names, CIDRs and refused ranges (src/network/address.h).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <sys/un.h>

#include <string>
#include <vector>

#include "network/address.h"
#include "network/policy.h"

namespace kiln::network {
namespace network_address_test {
namespace {

// The refused category of `host` read as an IP literal; "<name>" when it is none.
std::string CategoryOf(std::string_view host) {
  std::optional<Address> a = ParseIpLiteral(host);
  return a ? RefusedCategory(*a) : "<name>";
}

Address Ip(std::string_view text) {
  std::optional<Address> a = ParseIpLiteral(text);
  EXPECT_TRUE(a.has_value()) << text;
  return a.value_or(Address{});
}

Cidr CidrOf(std::string_view text) {
  auto c = ParseCidr(text);
  EXPECT_TRUE(c.ok()) << text << ": " << c.status().message();
  return c.ok() ? *c : Cidr{};
}

struct Case {
  std::string host;
  std::string expected;
};

TEST(NetworkAddressTest, EverySpellingOfLoopbackIsTheSameV4Address) {
  for (std::string_view s :
       {"127.0.0.1", "127.1", "127.0.1", "2130706433", "0177.0.0.1", "0x7f.0.0.1", "0x7f000001",
        "0X7F000001", "0x7F.1", "127.0.0.1.", "017700000001", "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:7f00:1]", "::FFFF:7F00:1", "::ffff:127.0.0.1"}) {
    std::optional<Address> a = ParseIpLiteral(s);
    ASSERT_TRUE(a.has_value()) << s;
    EXPECT_FALSE(a->v6) << s;
    EXPECT_EQ(*a, Address::V4(127, 0, 0, 1)) << s;
    EXPECT_EQ(a->ToString(), "127.0.0.1") << s;
    EXPECT_EQ(RefusedCategory(*a), "loopback") << s;
  }
}

TEST(NetworkAddressTest, PrivateSpellingsAreRefusedWithTheirCategory) {
  const std::vector<Case> cases = {
      {"127.0.0.1", "loopback"},
      {"127.255.255.254", "loopback"},
      {"[::1]", "loopback"},
      {"::1", "loopback"},
      {"::ffff:10.0.0.1", "private"},
      {"[64:ff9b::a00:1]", "private"},                      // NAT64 of 10.0.0.1
      {"[64:ff9b::7f00:1]", "loopback"},                    // NAT64 of 127.0.0.1
      {"[64:ff9b:1::a00:1]", "private"},                    // local-use NAT64 of 10.0.0.1
      {"[64:ff9b:1::808:808]", "reserved"},                 // local-use NAT64 is never public
      {"[2002:a00:1::]", "private"},                        // 6to4 of 10.0.0.1
      {"2002:7f00:1::1", "loopback"},                       // 6to4 of 127.0.0.1
      {"2002:a9fe:a9fe::", "link-local"},                   // 6to4 of 169.254.169.254
      {"2001:0:4136:e378:8000:63bf:f5ff:fffe", "private"},  // Teredo client 10.0.0.1
      {"2001::80ff:fffe", "loopback"},                      // Teredo client 127.0.0.1
      {"::127.0.0.1", "loopback"},                          // IPv4-compatible
      {"::a00:1", "private"},                               // IPv4-compatible
      {"::ffff:0:a00:1", "private"},                        // SIIT IPv4-translated
      {"169.254.169.254", "link-local"},
      {"0251.0376.0251.0376", "link-local"},
      {"0xa9fea9fe", "link-local"},
      {"169.254.0.1", "link-local"},
      {"fd00:ec2::254", "metadata"},
      {"[FD00:EC2::254]", "metadata"},
      {"fd00:ec2::253", "private"},
      {"100.100.100.200", "metadata"},  // Alibaba's metadata service
      {"168.63.129.16", "metadata"},    // Azure's wire server
      {"0xa83f8110", "metadata"},       // the same, as one number
      {"[::ffff:168.63.129.16]", "metadata"},
      {"168.63.129.17", ""},
      {"100.64.0.1", "shared"},
      {"100.127.255.255", "shared"},
      {"0.0.0.0", "unspecified"},
      {"0", "unspecified"},
      {"0.1.2.3", "unspecified"},
      {"[::]", "unspecified"},
      {"::", "unspecified"},
      {"::ffff:0.0.0.0", "unspecified"},
      {"224.0.0.1", "multicast"},
      {"239.255.255.250", "multicast"},
      {"ff02::1", "multicast"},
      {"255.255.255.255", "broadcast"},
      {"4294967295", "broadcast"},
      {"10.1.2.3", "private"},
      {"012.1.2.3", "private"},
      {"172.16.0.1", "private"},
      {"172.31.255.255", "private"},
      {"192.168.1.1", "private"},
      {"fc00::1", "private"},
      {"fdff:ffff::1", "private"},
      {"fe80::1", "link-local"},
      {"[febf::1]", "link-local"},
      {"fec0::1", "reserved"},
      {"240.0.0.1", "reserved"},
      {"254.255.255.255", "reserved"},
      {"192.0.0.8", "reserved"},
      {"198.18.0.1", "reserved"},
      {"198.19.255.255", "reserved"},
      {"100::1", "reserved"},
  };
  for (const Case& c : cases) EXPECT_EQ(CategoryOf(c.host), c.expected) << c.host;
}

TEST(NetworkAddressTest, PublicAndDocumentationAddressesAreNotRefused) {
  for (std::string_view s : {"203.0.113.10",
                             "8.8.8.8",
                             "1.1.1.1",
                             "198.51.100.7",
                             "192.0.2.1",
                             "2001:db8::1",
                             "[2001:db8::1]",
                             "2606:4700:4700::1111",
                             "172.15.255.255",
                             "172.32.0.1",
                             "100.63.255.255",
                             "100.128.0.0",
                             "192.0.1.255",
                             "198.17.255.255",
                             "198.20.0.0",
                             "223.255.255.255",
                             "169.253.255.255",
                             "11.0.0.0",
                             "126.255.255.255",
                             "128.0.0.0",
                             "::ffff:8.8.8.8",
                             "64:ff9b::808:808",
                             "2002:808:808::1",
                             "2001:0:0:0:0:0:f7f7:f7f7",
                             "100:0:0:1::1",
                             "fe00::1",
                             "2001:4860:4860::8888"}) {
    EXPECT_EQ(CategoryOf(s), "") << s;
  }
}

TEST(NetworkAddressTest, CanonicalText) {
  EXPECT_EQ(Ip("0xcb.0.113.5").ToString(), "203.0.113.5");
  EXPECT_EQ(Ip("3405803781").ToString(), "203.0.113.5");
  EXPECT_EQ(Ip("203.0.113.5.").ToString(), "203.0.113.5");
  EXPECT_EQ(Ip("1.256").ToString(), "1.0.1.0");
  EXPECT_EQ(Ip("2001:DB8:0:0:0:0:0:1").ToString(), "2001:db8::1");
  EXPECT_EQ(Ip("[2001:db8::1]").ToString(), "2001:db8::1");
  EXPECT_EQ(Ip("[64:ff9b::a00:1]").ToString(), "64:ff9b::a00:1");
  EXPECT_TRUE(Ip("[64:ff9b::a00:1]").v6);
  EXPECT_EQ(Ip("::ffff:8.8.8.8"), Address::V4(8, 8, 8, 8));
  // Octal wins over leading zeros, as in inet_aton (and so getaddrinfo).
  EXPECT_EQ(Ip("010.010.010.010").ToString(), "8.8.8.8");
}

TEST(NetworkAddressTest, NamesAndMalformedLiteralsAreNotIpLiterals) {
  for (std::string_view s : {"example.com",
                             "1.2.3.4.example.com",
                             "localhost",
                             "0x7g.0.0.1",
                             "",
                             ".",
                             "1..2",
                             ".1",
                             "1.2.3.4.5",
                             "4294967296",
                             "1.2.3.256",
                             "1.2.65536",
                             "0x",
                             "08",
                             "0.0.0.08",
                             "+1",
                             "-1",
                             "127.0.0.1..",
                             "[127.0.0.1]",
                             "[]",
                             "[::1",
                             "::1]",
                             "[::1].",
                             "::1.",
                             "fe80::1%eth0",
                             "[fe80::1%25eth0]",
                             "fe80::1%1",
                             "127.0.0.1 junk",
                             " 127.0.0.1",
                             "127.0.0.1:80",
                             "[::1]:80",
                             "1.2.3.4/32",
                             "::ffff:127.0.0.1.",
                             "12345::1",
                             "1:2:3:4:5:6:7:8:9"}) {
    EXPECT_FALSE(ParseIpLiteral(s).has_value()) << "'" << s << "'";
  }
  // A NUL ends the C string libc reads; what follows must not be ignored.
  EXPECT_FALSE(ParseIpLiteral(std::string("127.0.0.1\0x", 11)).has_value());
  EXPECT_FALSE(ParseIpLiteral(std::string("::1\0", 4)).has_value());
}

TEST(NetworkAddressTest, SockaddrRoundTrip) {
  sockaddr_storage ss;
  Address v4 = Ip("203.0.113.5");
  socklen_t len = v4.ToSockaddr(443, &ss);
  ASSERT_EQ(len, sizeof(sockaddr_in));
  const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
  EXPECT_EQ(in->sin_family, AF_INET);
  EXPECT_EQ(ntohs(in->sin_port), 443);
  EXPECT_EQ(Address::FromSockaddr(reinterpret_cast<sockaddr*>(&ss)), v4);

  Address v6 = Ip("2001:db8::1");
  len = v6.ToSockaddr(8080, &ss);
  ASSERT_EQ(len, sizeof(sockaddr_in6));
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
  EXPECT_EQ(in6->sin6_family, AF_INET6);
  EXPECT_EQ(ntohs(in6->sin6_port), 8080);
  EXPECT_EQ(Address::FromSockaddr(reinterpret_cast<sockaddr*>(&ss)), v6);
}

TEST(NetworkAddressTest, FromSockaddrUnmapsMappedV6) {
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  ASSERT_EQ(inet_pton(AF_INET6, "::ffff:10.0.0.1", &in6.sin6_addr), 1);
  std::optional<Address> a = Address::FromSockaddr(reinterpret_cast<sockaddr*>(&in6));
  ASSERT_TRUE(a.has_value());
  EXPECT_FALSE(a->v6);
  EXPECT_EQ(*a, Address::V4(10, 0, 0, 1));
  EXPECT_EQ(RefusedCategory(*a), "private");
}

TEST(NetworkAddressTest, FromSockaddrRefusesOtherFamilies) {
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  EXPECT_FALSE(Address::FromSockaddr(reinterpret_cast<sockaddr*>(&un)).has_value());
  EXPECT_FALSE(Address::FromSockaddr(nullptr).has_value());
}

TEST(NetworkAddressTest, UnmappedOnlyTouchesMappedAddresses) {
  Address mapped;
  mapped.v6 = true;
  mapped.bytes[10] = mapped.bytes[11] = 0xff;
  mapped.bytes[12] = 192;
  mapped.bytes[13] = 168;
  mapped.bytes[15] = 1;
  EXPECT_EQ(Unmapped(mapped), Address::V4(192, 168, 0, 1));
  // A hand-built mapped address is still classified by its v4 address.
  EXPECT_EQ(RefusedCategory(mapped), "private");
  EXPECT_EQ(Unmapped(Ip("2001:db8::1")), Ip("2001:db8::1"));
  EXPECT_EQ(Unmapped(Ip("8.8.8.8")), Ip("8.8.8.8"));
}

TEST(NetworkAddressTest, NormalizeHostNames) {
  EXPECT_EQ(NormalizeHost("MiXeD.Case.COM.").value(), "mixed.case.com");
  EXPECT_EQ(NormalizeHost("example.com").value(), "example.com");
  EXPECT_EQ(NormalizeHost("under_score-and-dash.Example.com").value(),
            "under_score-and-dash.example.com");
  EXPECT_EQ(NormalizeHost("1.2.3.4.example.com").value(), "1.2.3.4.example.com");
  EXPECT_EQ(NormalizeHost("localhost").value(), "localhost");
  EXPECT_EQ(NormalizeHost("com").value(), "com");
  EXPECT_EQ(NormalizeHost("[::1]").value(), "::1");
  EXPECT_EQ(NormalizeHost("[2001:DB8::1]").value(), "2001:db8::1");
  EXPECT_EQ(NormalizeHost("2001:DB8::1").value(), "2001:db8::1");
  EXPECT_EQ(NormalizeHost("127.0.0.1.").value(), "127.0.0.1");
  // IP literals keep their spelling: ParseIpLiteral reads them all.
  EXPECT_EQ(NormalizeHost("0X7F.1").value(), "0x7f.1");
  EXPECT_EQ(NormalizeHost("2130706433").value(), "2130706433");

  std::string label63(63, 'a');
  EXPECT_EQ(NormalizeHost(label63 + ".com").value(), label63 + ".com");
  // 253 characters: four labels of 63 (with three dots) and "x".
  std::string longest = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');
  ASSERT_EQ(longest.size(), 253u);
  EXPECT_EQ(NormalizeHost(longest + ".").value(), longest);
}

// fuzz_egress_rules: "101.0.173.001.." was kept as the name "101.0.173.001."
// (ParseIpLiteral takes one trailing dot after NormalizeHost dropped one),
// which read back as the address 101.0.173.1.
TEST(NetworkAddressTest, TwoTrailingDotsAreAnEmptyLabel) {
  EXPECT_EQ(NormalizeHost("101.0.173.001..").status().code(), Code::kInvalidRequest);
  EXPECT_EQ(NormalizeHost("example.com..").status().code(), Code::kInvalidRequest);
  EXPECT_EQ(NormalizeHost("127.0.0.1.").value(), "127.0.0.1");
  PolicyError error;
  EXPECT_FALSE(ParsePolicy(nlohmann::json{{"internet", true}, {"allow", {"101.0.173.001.."}}},
                           "network", &error));
  EXPECT_EQ(error.path, "network.allow[0]");
}

TEST(NetworkAddressTest, NormalizeHostErrors) {
  std::string label64(64, 'a');
  std::string too_long = std::string(63, 'a') + "." + std::string(63, 'a') + "." +
                         std::string(63, 'a') + "." + std::string(62, 'b');
  ASSERT_EQ(too_long.size(), 254u);
  const std::vector<Case> cases = {
      {"", "is empty"},
      {".", "is empty"},
      {"a..b", "has an empty label"},
      {".a", "has an empty label"},
      {"example.com..", "has an empty label"},
      {"a b", "contains whitespace"},
      {"a\tb", "contains whitespace"},
      {"example.com\n", "contains whitespace"},
      {std::string("a\0b", 3), "contains a NUL byte"},
      {"fe80::1%eth0", "contains '%' (zone ids and URL escapes are not accepted)"},
      {"ex%61mple.com", "contains '%' (zone ids and URL escapes are not accepted)"},
      {"example.com/path", "contains '/'"},
      {"user@example.com", "contains '@'"},
      {too_long, "is longer than 253 characters"},
      {label64 + ".com", "has a label longer than 63 characters"},
      {"ex!ample.com", "has a character outside a-z, 0-9, '-', '_' and '.'"},
      {"ex\xc3\xa4mple.com", "has a character outside a-z, 0-9, '-', '_' and '.'"},
      {"*.example.com", "has a character outside a-z, 0-9, '-', '_' and '.'"},
      {"0x7g.0.0.1", "ends in a number but is not a valid IPv4 address"},
      {"1.2.3.4.5", "ends in a number but is not a valid IPv4 address"},
      {"1.2.3.256", "ends in a number but is not a valid IPv4 address"},
      {"example.123", "ends in a number but is not a valid IPv4 address"},
      {"example.0x1f", "ends in a number but is not a valid IPv4 address"},
      {"example.0x", "ends in a number but is not a valid IPv4 address"},
      {"[127.0.0.1]", "has brackets that do not enclose an IPv6 address"},
      {"[::1", "has brackets that do not enclose an IPv6 address"},
      {"[example.com]", "has brackets that do not enclose an IPv6 address"},
      {"[::1]:443", "has brackets that do not enclose an IPv6 address"},
      {"example.com:443", "is not a valid IPv6 address (ports are not accepted)"},
      {"::1]", "is not a valid IPv6 address (ports are not accepted)"},
  };
  for (const Case& c : cases) {
    auto r = NormalizeHost(c.host);
    EXPECT_FALSE(r.ok()) << c.host;
    EXPECT_EQ(r.status().message(), c.expected) << c.host;
  }
  EXPECT_EQ(NormalizeHost("a b").status().code(), Code::kInvalidRequest);
}

TEST(NetworkAddressTest, ParseCidrAndContains) {
  Cidr c = CidrOf("203.0.113.0/24");
  EXPECT_EQ(c.ToString(), "203.0.113.0/24");
  EXPECT_EQ(c.prefix, 24);
  EXPECT_TRUE(c.Contains(Ip("203.0.113.0")));
  EXPECT_TRUE(c.Contains(Ip("203.0.113.255")));
  EXPECT_FALSE(c.Contains(Ip("203.0.114.0")));
  EXPECT_FALSE(c.Contains(Ip("203.0.112.255")));
  EXPECT_TRUE(c.Contains(Ip("::ffff:cb00:7109")));      // read as v4 203.0.113.9
  EXPECT_FALSE(c.Contains(Ip("2001:db8::cb00:7100")));  // families never mix

  EXPECT_EQ(CidrOf("203.0.113.77/24").ToString(), "203.0.113.0/24");  // host bits cleared
  EXPECT_EQ(CidrOf("10.200.1.1/9").ToString(), "10.128.0.0/9");
  EXPECT_EQ(CidrOf("203.0.113.5").ToString(), "203.0.113.5/32");
  EXPECT_TRUE(CidrOf("203.0.113.5").Contains(Ip("203.0.113.5")));
  EXPECT_FALSE(CidrOf("203.0.113.5").Contains(Ip("203.0.113.4")));
  EXPECT_EQ(CidrOf("8.8.8.8/0").ToString(), "0.0.0.0/0");
  EXPECT_TRUE(CidrOf("0.0.0.0/0").Contains(Ip("8.8.8.8")));
  EXPECT_FALSE(CidrOf("0.0.0.0/0").Contains(Ip("2001:db8::1")));
}

TEST(NetworkAddressTest, ParseCidrV6) {
  Cidr c = CidrOf("2001:DB8::/32");
  EXPECT_EQ(c.ToString(), "2001:db8::/32");
  EXPECT_TRUE(c.base.v6);
  EXPECT_TRUE(c.Contains(Ip("2001:db8:ffff:ffff::1")));
  EXPECT_FALSE(c.Contains(Ip("2001:db9::")));
  EXPECT_EQ(CidrOf("2001:db8:9234:5678::1/33").ToString(), "2001:db8:8000::/33");
  EXPECT_EQ(CidrOf("2001:db8::1").ToString(), "2001:db8::1/128");
  EXPECT_TRUE(CidrOf("::/0").Contains(Ip("2001:db8::1")));
  EXPECT_FALSE(CidrOf("::/0").Contains(Ip("8.8.8.8")));
  // A mapped range of /96 or longer is the v4 range it maps.
  EXPECT_EQ(CidrOf("::ffff:10.0.0.0/104").ToString(), "10.0.0.0/8");
  EXPECT_EQ(CidrOf("::ffff:10.0.0.1").ToString(), "10.0.0.1/32");
  EXPECT_FALSE(CidrOf("::ffff:10.0.0.0/104").base.v6);
}

TEST(NetworkAddressTest, ParseCidrErrors) {
  const std::vector<Case> cases = {
      {"10.0.0.0/33", "prefix length must be a number from 0 to 32"},
      {"2001:db8::/129", "prefix length must be a number from 0 to 128"},
      {"10.0.0.0/", "prefix length must be a number from 0 to 32"},
      {"10.0.0.0/-1", "prefix length must be a number from 0 to 32"},
      {"10.0.0.0/+8", "prefix length must be a number from 0 to 32"},
      {"10.0.0.0/08", "prefix length must be a number from 0 to 32"},
      {"10.0.0.0/ 8", "prefix length must be a number from 0 to 32"},
      {"10.0.0.0/8/8", "prefix length must be a number from 0 to 32"},
      {"10.0.0.0/1000", "prefix length must be a number from 0 to 32"},
      {"10.1/8", "'10.1' is not a dotted-quad IPv4 or an IPv6 address"},
      {"0x0a.0.0.0/8", "'0x0a.0.0.0' is not a dotted-quad IPv4 or an IPv6 address"},
      {"010.0.0.0/8", "'010.0.0.0' is not a dotted-quad IPv4 or an IPv6 address"},
      {"example.com/8", "'example.com' is not a dotted-quad IPv4 or an IPv6 address"},
      {"[2001:db8::]/32", "'[2001:db8::]' is not a dotted-quad IPv4 or an IPv6 address"},
      {"/8", "'' is not a dotted-quad IPv4 or an IPv6 address"},
      {"", "'' is not a dotted-quad IPv4 or an IPv6 address"},
      {std::string("10.0.0.0\0/8", 11), "contains a NUL byte"},
  };
  for (const Case& c : cases) {
    auto r = ParseCidr(c.host);
    EXPECT_FALSE(r.ok()) << c.host;
    EXPECT_EQ(r.status().message(), c.expected) << c.host;
  }
  EXPECT_FALSE(ParseCidr("10.0.0.0/33").ok());
}

TEST(NetworkAddressTest, RefusedCategoryOfRanges) {
  const std::vector<Case> cases = {
      {"192.168.0.0/16", "private"},
      {"192.168.4.0/24", "private"},
      {"10.0.0.0/8", "private"},
      {"127.0.0.0/8", "loopback"},
      {"169.254.169.254/32", "link-local"},
      {"100.100.100.200/32", "metadata"},
      {"fe80::/10", "link-local"},
      {"fd00:ec2::254/128", "metadata"},
      {"64:ff9b::a00:0/104", "private"},
      {"2002:a00::/24", "private"},
      {"::ffff:10.0.0.0/104", "private"},
      {"64:ff9b:1::/48", "reserved"},
      // Not wholly inside one refused range.
      {"10.0.0.0/7", ""},
      {"0.0.0.0/0", ""},
      {"::/0", ""},
      {"fe80::/9", ""},
      {"64:ff9b::/96", ""},
      {"2002::/16", ""},
      {"224.0.0.0/3", ""},  // multicast and reserved, but neither alone
      {"203.0.113.0/24", ""},
      {"2001:db8::/32", ""},
  };
  for (const Case& c : cases) EXPECT_EQ(RefusedCategory(CidrOf(c.host)), c.expected) << c.host;
}

}  // namespace
}  // namespace network_address_test
}  // namespace kiln::network
