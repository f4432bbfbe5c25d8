// The shared string helpers (common/strings.h): ASCII case and trimming.
#include "common/strings.h"

#include <gtest/gtest.h>

namespace kiln {
namespace strings_test {
namespace {

TEST(StringsTest, AsciiCaseLeavesOtherBytesAlone) {
  EXPECT_EQ(AsciiLower("Docker.IO:5000"), "docker.io:5000");
  EXPECT_EQ(AsciiUpper("workdir"), "WORKDIR");
  EXPECT_EQ(AsciiLower("\xC3\x89t\xC3\xA9"), "\xC3\x89t\xC3\xA9");  // not locale-aware
}

TEST(StringsTest, TrimBlanksAndTrimOfChosenCharacters) {
  EXPECT_EQ(TrimBlanks(" \t value \t"), "value");
  EXPECT_EQ(TrimBlanks("\rvalue\r"), "\rvalue\r");  // blanks are spaces and tabs
  EXPECT_EQ(Trim("\r a b \r", " \t\r"), "a b");
  EXPECT_EQ(TrimLeft(" \v\fword ", " \t\r\v\f"), "word ");
  EXPECT_EQ(TrimRight(" word \r\f", " \t\r\v\f"), " word");
  EXPECT_EQ(Trim("   ", " "), "");
  EXPECT_EQ(Trim("", " "), "");
}

}  // namespace
}  // namespace strings_test
}  // namespace kiln
