// envd's paths (src/api/e2b/envd/envd.cc): made absolute against the
// user's home and cleaned as Go's filepath.Clean cleans them, so answers
// name /home/user/a.txt for "./a.txt", as E2B's envd does.
#include <gtest/gtest.h>

#include "api/e2b/envd/rpc.h"

namespace e2b_paths_test {
namespace {

using kiln::api::e2b::CleanPath;
using kiln::api::e2b::EnvdUser;
using kiln::api::e2b::ResolvePath;

TEST(EnvdPaths, CleanTakesOutDotsAndRepeatedSlashes) {
  EXPECT_EQ(CleanPath("/home/user/./a.txt"), "/home/user/a.txt");
  EXPECT_EQ(CleanPath("/home/user/b/../a.txt"), "/home/user/a.txt");
  EXPECT_EQ(CleanPath("//tmp///x/"), "/tmp/x");
  EXPECT_EQ(CleanPath("/../.."), "/");
  EXPECT_EQ(CleanPath("/"), "/");
}

TEST(EnvdPaths, RelativePathsStartAtTheUsersHome) {
  EnvdUser user;  // E2B's /home/user
  EXPECT_EQ(ResolvePath(user, ".", "path"), "/home/user");
  EXPECT_EQ(ResolvePath(user, "./notes.txt", "path"), "/home/user/notes.txt");
  EXPECT_EQ(ResolvePath(user, "~/x/../y", "path"), "/home/user/y");
  EXPECT_EQ(ResolvePath(user, "/etc/", "path"), "/etc");
  user.home = "/root";
  EXPECT_EQ(ResolvePath(user, "a", "path"), "/root/a");
}

}  // namespace
}  // namespace e2b_paths_test
