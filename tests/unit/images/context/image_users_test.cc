// USER / --chown resolution against an image's passwd and group files.
#include "images/context/image_users.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "unit/support/images_test_util.h"
#include "unit/support/temp_dir.h"

namespace kiln::images {
namespace images_users_test {
namespace {

using testing::WriteFile;
using testutil::TempDir;

class ImageUsersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(root_ / "etc/passwd",
              "# a comment\n"
              "root:x:0:0:root:/root:/bin/sh\n"
              "+nis\n"
              "broken line\n"
              "app:x:1000:1001:App:/home/app:/bin/sh\n"
              "nohome:x:1002:1002:::/bin/sh\n");
    WriteFile(root_ / "etc/group", "root:x:0:\nstaff:x:50:app\napp:x:1001:\n");
  }
  TempDir root_;
};

TEST_F(ImageUsersTest, Forms) {
  const struct {
    const char* spec;
    uint32_t uid, gid;
    const char* name;
    const char* home;
  } cases[] = {
      {"", 0, 0, "root", "/root"},
      {"root", 0, 0, "root", "/root"},
      {"app", 1000, 1001, "app", "/home/app"},
      {"app:staff", 1000, 50, "app", "/home/app"},
      {"app:7", 1000, 7, "app", "/home/app"},
      {"1000", 1000, 1001, "app", "/home/app"},  // passwd names a numeric uid
      {"1000:staff", 1000, 50, "app", "/home/app"},
      {"4242", 4242, 0, "4242", "/"},  // numeric ids need no entry
      {"4242:4343", 4242, 4343, "4242", "/"},
      {"nohome", 1002, 1002, "nohome", "/"},
  };
  for (const auto& c : cases) {
    Result<ImageUser> u = ResolveImageUser(root_.path(), c.spec);
    ASSERT_TRUE(u.ok()) << c.spec << ": " << u.status().ToString();
    EXPECT_EQ(u->uid, c.uid) << c.spec;
    EXPECT_EQ(u->gid, c.gid) << c.spec;
    EXPECT_EQ(u->name, c.name) << c.spec;
    EXPECT_EQ(u->home, c.home) << c.spec;
  }
}

TEST_F(ImageUsersTest, UnknownNamesAndBadSpecs) {
  Result<ImageUser> u = ResolveImageUser(root_.path(), "nobody");
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().code(), Code::kInvalidRequest);
  EXPECT_EQ(u.status().message(), "unknown user nobody in the image");
  EXPECT_EQ(u.status().details()["user"], "nobody");

  u = ResolveImageUser(root_.path(), "app:wheel");
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().message(), "unknown group wheel in the image");
  EXPECT_EQ(u.status().details()["group"], "wheel");

  for (const char* bad : {":staff", "app:", "a:b:c", "99999999999", "app:99999999999"}) {
    u = ResolveImageUser(root_.path(), bad);
    ASSERT_FALSE(u.ok()) << bad;
    EXPECT_EQ(u.status().code(), Code::kInvalidRequest) << bad;
  }
}

TEST(ImageUsersNoFilesTest, NumericIdsWithoutPasswd) {
  TempDir root;
  Result<ImageUser> u = ResolveImageUser(root.path(), "123:456");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->uid, 123u);
  EXPECT_EQ(u->gid, 456u);
  EXPECT_EQ(u->name, "123");
  EXPECT_EQ(u->home, "/");
  u = ResolveImageUser(root.path(), "");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->name, "root");
  EXPECT_EQ(u->home, "/");
  // No passwd: no names but root, which is uid 0 in any image (scratch, distroless).
  u = ResolveImageUser(root.path(), "root");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->uid, 0u);
  EXPECT_FALSE(ResolveImageUser(root.path(), "daemon").ok());
}

// The image's /etc/passwd is a symlink to /etc/shadow: it must be the
// image's /etc/shadow, never the host's.
TEST(ImageUsersEscapeTest, PasswdSymlinkResolvesInsideTheRoot) {
  TempDir root;
  WriteFile(root / "etc/shadow", "inner:x:77:78::/inner:/bin/sh\n");
  std::filesystem::create_symlink("/etc/shadow", root / "etc/passwd");
  Result<ImageUser> u = ResolveImageUser(root.path(), "inner");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->uid, 77u);
  EXPECT_EQ(u->home, "/inner");
  // The host's users are not the image's.
  EXPECT_FALSE(ResolveImageUser(root.path(), "daemon").ok());

  // A relative link climbing out lands on the image's own /etc as well.
  TempDir root2;
  std::filesystem::create_directories(root2 / "etc");
  std::filesystem::create_symlink("../../../../../../../etc/group", root2 / "etc/passwd");
  WriteFile(root2 / "etc/group", "grp:x:5:5::/g:/bin/sh\n");
  u = ResolveImageUser(root2.path(), "grp");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->uid, 5u);
  EXPECT_FALSE(ResolveImageUser(root2.path(), "daemon").ok());
}

}  // namespace
}  // namespace images_users_test
}  // namespace kiln::images
