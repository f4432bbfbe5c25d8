// Standard base64 (src/common/base64.h): RFC 4648 section 10 vectors, every
// byte value, and rejection of malformed input.
#include <gtest/gtest.h>

#include <string>

#include "common/base64.h"

namespace kiln::proto {
namespace base64_test {
namespace {

struct Vector {
  const char* plain;
  const char* encoded;
};

// RFC 4648, section 10.
const Vector kRfc4648[] = {
    {"", ""},
    {"f", "Zg=="},
    {"fo", "Zm8="},
    {"foo", "Zm9v"},
    {"foob", "Zm9vYg=="},
    {"fooba", "Zm9vYmE="},
    {"foobar", "Zm9vYmFy"},
};

TEST(Base64Test, EncodesRfc4648Vectors) {
  for (const auto& v : kRfc4648) EXPECT_EQ(Base64Encode(v.plain), v.encoded) << v.plain;
}

TEST(Base64Test, DecodesRfc4648Vectors) {
  for (const auto& v : kRfc4648) {
    auto d = Base64Decode(v.encoded);
    ASSERT_TRUE(d.has_value()) << v.encoded;
    EXPECT_EQ(*d, v.plain);
  }
}

TEST(Base64Test, UsesPlusAndSlashAlphabet) {
  EXPECT_EQ(Base64Encode(std::string("\xfb\xff\xbf", 3)), "+/+/");
  EXPECT_EQ(Base64Encode(std::string("\x00\x00\x00", 3)), "AAAA");
  EXPECT_EQ(Base64Encode(std::string("\xff\xff\xff", 3)), "////");
  EXPECT_EQ(Base64Decode("+/+/").value_or("?"), std::string("\xfb\xff\xbf", 3));
}

TEST(Base64Test, EveryByteValueRoundTrips) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  std::string enc = Base64Encode(all);
  EXPECT_EQ(enc.size(), (256 + 2) / 3 * 4);
  auto dec = Base64Decode(enc);
  ASSERT_TRUE(dec.has_value());
  EXPECT_EQ(*dec, all);
  // Each byte alone, and in each position of a 3-byte group.
  for (int i = 0; i < 256; ++i) {
    for (int pos = 0; pos < 3; ++pos) {
      for (int len = pos + 1; len <= 3; ++len) {
        std::string s(len, 'a');
        s[pos] = static_cast<char>(i);
        auto back = Base64Decode(Base64Encode(s));
        ASSERT_TRUE(back.has_value()) << i << " " << pos << " " << len;
        ASSERT_EQ(*back, s) << i << " " << pos << " " << len;
      }
    }
  }
}

TEST(Base64Test, LengthsRoundTripWithCorrectPadding) {
  for (size_t n = 0; n < 50; ++n) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 97 + 13);
    std::string enc = Base64Encode(s);
    EXPECT_EQ(enc.size() % 4, 0u);
    size_t pad = enc.size() - enc.find_last_not_of('=') - 1;
    if (n == 0) pad = 0;
    EXPECT_EQ(pad, (3 - n % 3) % 3) << n;
    EXPECT_EQ(Base64Decode(enc).value_or("?"), s) << n;
  }
}

TEST(Base64Test, RejectsCharactersOutsideTheAlphabet) {
  EXPECT_FALSE(Base64Decode("Zm9v!A==").has_value());
  EXPECT_FALSE(Base64Decode("Zm9-").has_value());  // base64url '-'
  EXPECT_FALSE(Base64Decode("Zm9_").has_value());  // base64url '_'
  EXPECT_FALSE(Base64Decode("Zm 9v").has_value());
  EXPECT_FALSE(Base64Decode("Zm9v\n").has_value());
  EXPECT_FALSE(Base64Decode("Zm9v\nZm9v").has_value());
  EXPECT_FALSE(Base64Decode(std::string("Zm\0v", 4)).has_value());
  EXPECT_FALSE(Base64Decode("Zm\xc3\xa9").has_value());
}

TEST(Base64Test, RejectsWrongLength) {
  EXPECT_FALSE(Base64Decode("Z").has_value());
  EXPECT_FALSE(Base64Decode("Zm").has_value());
  EXPECT_FALSE(Base64Decode("Zm9").has_value());
  EXPECT_FALSE(Base64Decode("Zm9vY").has_value());
  EXPECT_FALSE(Base64Decode("Zg=").has_value());  // unpadded-ish
  EXPECT_FALSE(Base64Decode("Zg").has_value());   // padding omitted
  // Views cut out of a longer valid text: the decoder must look only at the
  // view, never at the bytes after it.
  const std::string_view full = "Zm9vYmFy";
  for (size_t n = 1; n < full.size(); ++n) {
    if (n % 4 == 0) continue;
    EXPECT_FALSE(Base64Decode(full.substr(0, n)).has_value()) << n;
  }
  EXPECT_EQ(Base64Decode(full.substr(0, 4)).value_or("?"), "foo");
}

TEST(Base64Test, RejectsBadPadding) {
  EXPECT_FALSE(Base64Decode("====").has_value());
  EXPECT_FALSE(Base64Decode("Z===").has_value());  // three pad characters
  EXPECT_FALSE(Base64Decode("Zg=a").has_value());  // data after padding
  EXPECT_FALSE(Base64Decode("Z=g=").has_value());
  EXPECT_FALSE(Base64Decode("Zg==Zm9v").has_value());  // padding not in the last quantum
  EXPECT_FALSE(Base64Decode("Zm8=Zm8=").has_value());
  EXPECT_FALSE(Base64Decode("=Zm9").has_value());
}

}  // namespace
}  // namespace base64_test
}  // namespace kiln::proto
