#include "common/path_ids.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln {
namespace path_ids_test {
namespace {

const std::string kHex(64, 'a');

TEST(PathIdsTest, Sha256DigestParsesOnlySha256AndSixtyFourLowercaseHex) {
  ASSERT_TRUE(Sha256Digest::Parse("sha256:" + kHex));
  EXPECT_EQ(Sha256Digest::Parse("sha256:" + kHex)->hex(), kHex);
  EXPECT_EQ(Sha256Digest::Parse("sha256:" + kHex)->str(), "sha256:" + kHex);
  for (const std::string& bad :
       {kHex, "sha256:" + kHex + "/..", "sha256:" + kHex + "/pwn", "sha256:" + kHex.substr(1),
        "sha256:" + kHex + "0", "sha256:" + std::string(64, 'A'), "sha512:" + kHex,
        "sha256:../../" + kHex.substr(6), "SHA256:" + kHex, "sha256:" + kHex + "\n",
        std::string("sha256:") + std::string(63, 'a') + '\0', std::string()})
    EXPECT_FALSE(Sha256Digest::Parse(bad)) << bad;
  EXPECT_TRUE(Sha256Digest::FromHex(kHex));
  EXPECT_FALSE(Sha256Digest::FromHex("sha256:" + kHex));
  EXPECT_EQ(Sha256Digest::Of("").hex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(PathIdsTest, LayerIdIsADigestInHexOrKilnsBase) {
  EXPECT_TRUE(LayerId::Parse(kHex));
  EXPECT_FALSE(LayerId::Parse(kHex)->builtin());
  ASSERT_TRUE(LayerId::Parse("base-0123456789abcdef"));
  EXPECT_TRUE(LayerId::Parse("base-0123456789abcdef")->builtin());
  for (const std::string& bad :
       {"sha256:" + kHex, kHex + "/..", std::string(".."), std::string("base"),
        std::string("base-0123456789abcde"), std::string("base-../x"),
        std::string("base-0123456789ABCDEF"), std::string("")})
    EXPECT_FALSE(LayerId::Parse(bad)) << bad;
  EXPECT_EQ(LayerId::Of(*Sha256Digest::FromHex(kHex)).str(), kHex);
}

TEST(PathIdsTest, UuidIsLowercaseEightFourFourFourTwelve) {
  EXPECT_TRUE(Uuid::Parse("0b703824-3874-4daa-b590-4efa516937be"));
  for (const char* bad :
       {"0B703824-3874-4DAA-B590-4EFA516937BE", "0b703824-3874-4daa-b590-4efa516937b",
        "0b703824-3874-4daa-b590-4efa516937be0", "0b7038243874-4daa-b590-4efa516937be",
        "../3824-3874-4daa-b590-4efa516937be", ""})
    EXPECT_FALSE(Uuid::Parse(bad)) << bad;
}

}  // namespace
}  // namespace path_ids_test
}  // namespace kiln
