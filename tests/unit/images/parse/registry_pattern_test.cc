// --allow-registry values (src/images/parse/registry_pattern.h).
#include <gtest/gtest.h>

#include "images/parse/registry_pattern.h"

namespace kiln::images {
namespace images_registry_pattern_test {
namespace {

ImageRef Ref(const std::string& text) { return *ParseImageRef(text); }

TEST(RegistryPatternTest, AHostMatchesItOnAnyPort) {
  auto p = ParseRegistryPattern("LocalHost");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->Matches(Ref("localhost:5000/a/b:1")));
  EXPECT_TRUE(p->Matches(Ref("localhost/a")));
  EXPECT_FALSE(p->Matches(Ref("localhost.example.com/a")));
}

TEST(RegistryPatternTest, AHostAndPortMatchesThatPortOnly) {
  auto p = ParseRegistryPattern("127.0.0.1:5000");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->host, "127.0.0.1");
  EXPECT_EQ(p->port, 5000);
  EXPECT_TRUE(p->Matches(Ref("127.0.0.1:5000/x:1")));
  EXPECT_FALSE(p->Matches(Ref("127.0.0.1:5001/x:1")));
  EXPECT_FALSE(p->Matches(Ref("127.0.0.1/x:1")));
  auto v6 = ParseRegistryPattern("[::1]:5000");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_TRUE(v6->Matches(Ref("[::1]:5000/x")));
  EXPECT_FALSE(v6->Matches(Ref("[::1]:6000/x")));
  auto bare_v6 = ParseRegistryPattern("::1");
  ASSERT_TRUE(bare_v6.ok());
  EXPECT_FALSE(bare_v6->port);
}

TEST(RegistryPatternTest, RefusesWhatWouldMatchNothing) {
  for (const char* bad :
       {"", "http://127.0.0.1:5000", "127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:5000/x",
        "host:port", "[::1", "[nope]:1", "a..b", "user@h", "1:2:3:zz"}) {
    auto p = ParseRegistryPattern(bad);
    EXPECT_FALSE(p.ok()) << bad;
    if (!p.ok()) EXPECT_NE(p.status().message().find("registry host"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace images_registry_pattern_test
}  // namespace kiln::images
