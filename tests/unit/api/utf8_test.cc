// UTF-8 helpers of the API (src/api/utf8.h): never split a character across
// stream chunks, and turn arbitrary command output into valid UTF-8.
#include <gtest/gtest.h>

#include <string>

#include "api/utf8.h"

namespace kiln::api {
namespace utf8_test {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

// Independent strict validator (RFC 3629), used to check SanitizeUtf8's output.
bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      len = 1;
      cp = c;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else
      return false;
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      unsigned char d = s[i + k];
      if ((d & 0xC0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000))
      return false;
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

size_t Count(const std::string& s, const std::string& sub) {
  size_t n = 0;
  for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
  return n;
}

TEST(Utf8Test, ValidatorSelfCheck) {
  EXPECT_TRUE(IsValidUtf8("abc\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xC0\x80"));
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));
  EXPECT_FALSE(IsValidUtf8("\x80"));
}

TEST(Utf8Test, CompletePrefixOfAsciiIsWhole) {
  EXPECT_EQ(CompleteUtf8Prefix(""), 0u);
  EXPECT_EQ(CompleteUtf8Prefix("a"), 1u);
  EXPECT_EQ(CompleteUtf8Prefix("hello world\n"), 12u);
}

TEST(Utf8Test, CompletePrefixOfCompleteSequencesIsWhole) {
  EXPECT_EQ(CompleteUtf8Prefix("\xC3\xA9"), 2u);          // é
  EXPECT_EQ(CompleteUtf8Prefix("\xE2\x82\xAC"), 3u);      // €
  EXPECT_EQ(CompleteUtf8Prefix("\xF0\x9F\x98\x80"), 4u);  // 😀
  EXPECT_EQ(CompleteUtf8Prefix("x\xF0\x9F\x98\x80"), 5u);
  EXPECT_EQ(CompleteUtf8Prefix("\xE2\x82\xAC\xC3\xA9"), 5u);
}

TEST(Utf8Test, CompletePrefixCutsEveryPartialSequence) {
  const std::string chars[] = {"\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xF4\x8F\xBF\xBF"};
  for (const auto& ch : chars) {
    for (size_t cut = 1; cut < ch.size(); ++cut) {
      std::string s = "ab" + ch.substr(0, cut);
      EXPECT_EQ(CompleteUtf8Prefix(s), 2u) << "len " << ch.size() << " cut " << cut;
      // Preceded by another complete multi-byte character.
      std::string t = "\xC3\xA9" + ch.substr(0, cut);
      EXPECT_EQ(CompleteUtf8Prefix(t), 2u) << "len " << ch.size() << " cut " << cut;
      // A lone partial sequence: nothing is complete.
      EXPECT_EQ(CompleteUtf8Prefix(ch.substr(0, cut)), 0u) << "len " << ch.size() << " cut " << cut;
    }
  }
}

TEST(Utf8Test, StreamingWithCompletePrefixNeverSplitsACharacter) {
  const std::string text = "Grüße, 世界! 😀 Привет € ok";
  for (size_t chunk = 1; chunk <= 7; ++chunk) {
    std::string pending, out;
    for (size_t i = 0; i < text.size(); i += chunk) {
      pending += text.substr(i, chunk);
      size_t n = CompleteUtf8Prefix(pending);
      std::string piece = pending.substr(0, n);
      EXPECT_TRUE(IsValidUtf8(piece)) << "chunk " << chunk << " at " << i;
      out += piece;
      pending.erase(0, n);
    }
    EXPECT_TRUE(pending.empty());
    EXPECT_EQ(out, text);
  }
}

TEST(Utf8Test, CompletePrefixPassesInvalidBytesThrough) {
  // Bytes that can never start a sequence are not held back (SanitizeUtf8
  // deals with them); holding them would stall a stream forever.
  EXPECT_EQ(CompleteUtf8Prefix("ab\xFF"), 3u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xC0"), 3u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\x80\x80\x80\x80"), 6u);
}

TEST(Utf8Test, SanitizeLeavesValidMultilingualTextUnchanged) {
  const std::string samples[] = {
      "",
      "plain ascii\twith\ncontrol\x01 chars and NUL:" + std::string(1, '\0'),
      "Grüße aus Köln",
      "日本語のテキスト",
      "Ελληνικά and Русский and العربية and עברית",
      "emoji 😀👍🏽 and 𝄞 (U+1D11E)",
      "\xEF\xBF\xBD already a replacement char",
      "\xF4\x8F\xBF\xBF max code point",
      "\xEE\x80\x80 private use, \xEF\xBB\xBF BOM",
      "\xED\x9F\xBF just below surrogates",
  };
  for (const auto& s : samples) EXPECT_EQ(SanitizeUtf8(s), s) << s;
}

TEST(Utf8Test, SanitizeReplacesLoneContinuationBytes) {
  EXPECT_EQ(SanitizeUtf8("a\x80z"), "a" + kFffd + "z");
  EXPECT_EQ(SanitizeUtf8("\xBF"), kFffd);
  EXPECT_EQ(SanitizeUtf8("\x80\x80"), kFffd + kFffd);
  EXPECT_EQ(SanitizeUtf8("\xC3\xA9\xA9"), "\xC3\xA9" + kFffd);  // one too many
}

TEST(Utf8Test, SanitizeReplacesOverlongEncodings) {
  // '/' as 2, 3 and 4 bytes, and NUL as C0 80 (Java's "modified UTF-8").
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), kFffd + kFffd);
  EXPECT_EQ(SanitizeUtf8("\xC1\xBF"), kFffd + kFffd);
  EXPECT_EQ(SanitizeUtf8("\xC0\x80"), kFffd + kFffd);
  EXPECT_EQ(SanitizeUtf8("\xE0\x80\xAF"), kFffd + kFffd + kFffd);
  EXPECT_EQ(SanitizeUtf8("\xE0\x9F\xBF"), kFffd + kFffd + kFffd);
  EXPECT_EQ(SanitizeUtf8("\xF0\x80\x80\xAF"), kFffd + kFffd + kFffd + kFffd);
  EXPECT_EQ(SanitizeUtf8("\xF0\x8F\xBF\xBF"), kFffd + kFffd + kFffd + kFffd);
  // The shortest forms right at the boundaries are fine.
  EXPECT_EQ(SanitizeUtf8("\xC2\x80"), "\xC2\x80");
  EXPECT_EQ(SanitizeUtf8("\xE0\xA0\x80"), "\xE0\xA0\x80");
  EXPECT_EQ(SanitizeUtf8("\xF0\x90\x80\x80"), "\xF0\x90\x80\x80");
}

TEST(Utf8Test, SanitizeReplacesSurrogates) {
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // U+D800
  EXPECT_EQ(SanitizeUtf8("\xED\xBF\xBF"), kFffd + kFffd + kFffd);  // U+DFFF
  // A CESU-8 surrogate pair for U+1F600.
  std::string out = SanitizeUtf8("x\xED\xA0\xBD\xED\xB8\x80y");
  EXPECT_EQ(out, "x" + kFffd + kFffd + kFffd + kFffd + kFffd + kFffd + "y");
}

TEST(Utf8Test, SanitizeReplacesCodePointsAboveMax) {
  EXPECT_EQ(SanitizeUtf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // U+110000
  EXPECT_EQ(SanitizeUtf8("\xF5\x80\x80\x80"), kFffd + kFffd + kFffd + kFffd);
  EXPECT_EQ(SanitizeUtf8("\xFE"), kFffd);
  EXPECT_EQ(SanitizeUtf8("\xFF"), kFffd);
}

TEST(Utf8Test, SanitizeTruncatedSequenceKeepsFollowingText) {
  // A cut-off sequence must not swallow the ASCII after it.
  for (const std::string bad : {"\xC3", "\xE2\x82", "\xF0\x9F\x98", "\xE2"}) {
    std::string out = SanitizeUtf8("<" + bad + ">");
    EXPECT_TRUE(IsValidUtf8(out)) << out;
    EXPECT_EQ(out.front(), '<');
    EXPECT_EQ(out.back(), '>');
    EXPECT_GE(Count(out, kFffd), 1u);
    EXPECT_EQ(out.find(bad), std::string::npos);
    // At the very end of the input as well.
    std::string tail = SanitizeUtf8("ok" + bad);
    EXPECT_TRUE(IsValidUtf8(tail));
    EXPECT_EQ(tail.substr(0, 2), "ok");
    EXPECT_GE(Count(tail, kFffd), 1u);
  }
}

TEST(Utf8Test, SanitizeOutputIsAlwaysValidForEveryByteAndPair) {
  for (int a = 0; a < 256; ++a) {
    std::string one(1, static_cast<char>(a));
    std::string s1 = SanitizeUtf8(one);
    ASSERT_TRUE(IsValidUtf8(s1)) << a;
    if (a < 0x80)
      ASSERT_EQ(s1, one);
    else
      ASSERT_EQ(s1, kFffd) << a;
    for (int b = 0x80; b < 256; ++b) {
      std::string two{static_cast<char>(a), static_cast<char>(b)};
      std::string s2 = SanitizeUtf8(two + "\xBF\xBF");
      ASSERT_TRUE(IsValidUtf8(s2)) << a << " " << b;
      ASSERT_TRUE(IsValidUtf8(SanitizeUtf8(two))) << a << " " << b;
    }
  }
}

TEST(Utf8Test, SanitizeIsIdempotent) {
  const std::string messy =
      "ok\xC0\x80\xED\xA0\x80\xE2\x82 \xF0\x9F\x98\x80\xFF\x80"
      "end";
  std::string once = SanitizeUtf8(messy);
  EXPECT_TRUE(IsValidUtf8(once));
  EXPECT_EQ(SanitizeUtf8(once), once);
  EXPECT_NE(once.find("\xF0\x9F\x98\x80"), std::string::npos);  // the valid emoji survives
  EXPECT_EQ(once.substr(0, 2), "ok");
  EXPECT_EQ(once.substr(once.size() - 3), "end");
}

}  // namespace
}  // namespace utf8_test
}  // namespace kiln::api
