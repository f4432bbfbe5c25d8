// The operator's internal endpoints: parsed strictly, and reached only
// where a sandbox's own policy would reach a public host of that name.
#include "network/internal_endpoints.h"

#include <gtest/gtest.h>

#include "network/policy.h"

namespace kiln::network {
namespace internal_endpoints_test {
namespace {

Address Ip(const char* text) { return *ParseIpLiteral(text); }

InternalEndpoints Trainer() {
  return InternalEndpoints({*ParseInternalEndpoint("trainer=10.0.0.5:18001")});
}

TEST(InternalEndpoints, ParseNameAddressAndPort) {
  auto e = ParseInternalEndpoint("Trainer.Local=10.0.0.5:18001");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->name, "trainer.local");
  EXPECT_EQ(e->address, Ip("10.0.0.5"));
  EXPECT_EQ(e->port, 18001);
  auto v6 = ParseInternalEndpoint("llm=[fd00::7]:8000");
  ASSERT_TRUE(v6.ok()) << v6.status().message();
  EXPECT_EQ(v6->address, Ip("fd00::7"));
  for (const char* bad : {"10.0.0.5:18001", "=10.0.0.5:1", "t=10.0.0.5", "t=10.0.0.5:0",
                          "t=10.0.0.5:70000", "t=10.0.0.0/8:80", "t=0x0a000005:80",
                          "10.0.0.9=10.0.0.5:80", "t=trainer.example:80", "t=10.0.0.5:8a"}) {
    auto r = ParseInternalEndpoint(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) EXPECT_NE(r.status().message().find("NAME=ADDRESS:PORT"), std::string::npos);
  }
}

TEST(InternalEndpoints, FoundByNameOrByAddressAndPort) {
  InternalEndpoints internal = Trainer();
  ASSERT_NE(internal.ByName("trainer"), nullptr);
  EXPECT_EQ(internal.ByName("other"), nullptr);
  EXPECT_NE(internal.At(Ip("10.0.0.5"), 18001), nullptr);
  EXPECT_NE(internal.At(Ip("::ffff:10.0.0.5"), 18001), nullptr);  // mapped v6: the same
  EXPECT_EQ(internal.At(Ip("10.0.0.5"), 22), nullptr);            // another port is not
  EXPECT_EQ(internal.At(Ip("10.0.0.6"), 18001), nullptr);
}

Matcher Policy(bool internet, std::vector<std::string> allow, std::vector<std::string> deny = {}) {
  return Matcher(network::Policy{internet, std::move(allow), std::move(deny)});
}

TEST(InternalEndpoints, ReachedOnlyAsTheSandboxsPolicyWouldReachAPublicHost) {
  InternalEndpoints internal = Trainer();
  const Address at = Ip("10.0.0.5");
  auto verdict = [&](const Matcher& m, int port = 18001, const char* host = "trainer") {
    return m.Check(host, at, port, {}, internal);
  };
  EXPECT_EQ(verdict(Policy(true, {})), Verdict::kAllowed);
  EXPECT_EQ(verdict(Policy(true, {"trainer"})), Verdict::kAllowed);
  EXPECT_EQ(verdict(Policy(true, {}), 18001, "10.0.0.5"), Verdict::kAllowed);  // by address
  EXPECT_EQ(verdict(Policy(false, {})), Verdict::kInternetOff);
  EXPECT_EQ(verdict(Policy(true, {"example.com"})), Verdict::kPrivateAddress);
  EXPECT_EQ(verdict(Policy(true, {}, {"trainer"})), Verdict::kDenied);
  EXPECT_EQ(verdict(Policy(true, {}, {"trainer"}), 18001, "10.0.0.5"), Verdict::kPrivateAddress);
  EXPECT_EQ(verdict(Policy(true, {}), 22), Verdict::kPrivateAddress);
  // Every other private address stays refused, listed endpoints or not.
  EXPECT_EQ(Policy(true, {}).Check("x", Ip("10.0.0.6"), 18001, {}, internal),
            Verdict::kPrivateAddress);
  EXPECT_EQ(Policy(true, {}).Check("x", Ip("169.254.169.254"), 80, {}, internal),
            Verdict::kPrivateAddress);
}

}  // namespace
}  // namespace internal_endpoints_test
}  // namespace kiln::network
