// In-image paths cleaned by their text alone (images/parse/image_path.h).
// CleanPath and EscapesRoot are also tested where the context uses them
// (tests/unit/images/context/build_context_test.cc).
#include "images/parse/image_path.h"

#include <gtest/gtest.h>

namespace kiln::images {
namespace images_image_path_test {
namespace {

TEST(ImagePathTest, CleanPathStaysAtTheRoot) {
  EXPECT_EQ(CleanPath("/app/./src/../bin/"), "/app/bin");
  EXPECT_EQ(CleanPath("relative/x"), "/relative/x");
  EXPECT_EQ(CleanPath("/a/../../.."), "/");
}

TEST(ImagePathTest, PathPartsAreTheCleanComponents) {
  EXPECT_EQ(PathParts("/a/./b//c/"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(PathParts("x/../y"), (std::vector<std::string>{"y"}));
  EXPECT_TRUE(PathParts("/").empty());
  EXPECT_TRUE(PathParts("").empty());
}

TEST(ImagePathTest, EscapesRootCountsDepth) {
  EXPECT_TRUE(EscapesRoot("a/../.."));
  EXPECT_FALSE(EscapesRoot("a/b/../../c"));
  EXPECT_FALSE(EscapesRoot("/etc/passwd"));
}

}  // namespace
}  // namespace images_image_path_test
}  // namespace kiln::images
