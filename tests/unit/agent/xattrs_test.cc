// File metadata as extended attributes, on a real file of the host's file
// system (the sandbox's gVisor keeps user.* attributes the same way).
#include "agent/xattrs.h"

#include <fcntl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "common/unique_fd.h"
#include "proto/ops.h"

namespace kiln::agent {
namespace xattrs_test {
namespace {

class XattrsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/kiln-xattrs-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/f.txt";
    fd_ = UniqueFd(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd_);
    if (::fsetxattr(fd_.get(), "user.probe", "x", 1, 0) < 0)
      GTEST_SKIP() << dir_ << " keeps no user.* attributes";
    ::fremovexattr(fd_.get(), "user.probe");
  }
  void TearDown() override {
    fd_.reset();
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  std::string dir_, path_;
  UniqueFd fd_;
};

TEST_F(XattrsTest, AWriteLeavesExactlyItsAttributesUnderThePrefix) {
  ASSERT_EQ(::fsetxattr(fd_.get(), "user.e2b.stale", "old", 3, 0), 0);
  ASSERT_EQ(::fsetxattr(fd_.get(), "user.other", "kept", 4, 0), 0);
  ASSERT_EQ(ReplaceXattrs(fd_.get(), "user.e2b.", {{"user.e2b.author", "mish"}}), 0);
  auto got = ReadXattrs(path_, "user.e2b.");
  EXPECT_EQ(got, (std::map<std::string, std::string>{{"user.e2b.author", "mish"}}));
  EXPECT_EQ(ReadXattrs(path_, "user.other").at("user.other"), "kept");
  ASSERT_EQ(ReplaceXattrs(fd_.get(), "user.e2b.", {}), 0);  // a write with none clears them
  EXPECT_TRUE(ReadXattrs(path_, "user.e2b.").empty());
  EXPECT_TRUE(ReadXattrs(path_, "").empty());  // none asked for, none read
}

TEST_F(XattrsTest, AWriteOutsideThePrefixOrPastTheCapsIsRefused) {
  EXPECT_EQ(ReplaceXattrs(fd_.get(), "user.e2b.", {{"user.other", "v"}}), EINVAL);
  EXPECT_EQ(ReplaceXattrs(fd_.get(), "user.e2b.", {{"user.e2b.", "v"}}), EINVAL);
  EXPECT_EQ(ReplaceXattrs(fd_.get(), "user.e2b.",
                          {{"user.e2b.big", std::string(proto::kMaxXattrValue + 1, 'v')}}),
            EINVAL);
  std::map<std::string, std::string> many;
  for (size_t i = 0; i <= proto::kMaxXattrs; ++i) many["user.e2b.k" + std::to_string(i)] = "v";
  EXPECT_EQ(ReplaceXattrs(fd_.get(), "user.e2b.", many), EINVAL);
  EXPECT_TRUE(ReadXattrs(path_, "user.e2b.").empty());  // nothing half-done
}

TEST_F(XattrsTest, OnlyUserPrefixesMayBeAskedFor) {
  EXPECT_EQ(CheckXattrPrefix("user.e2b."), "");
  EXPECT_NE(CheckXattrPrefix("user."), "");  // the whole namespace: no
  EXPECT_NE(CheckXattrPrefix("trusted.overlay."), "");
  EXPECT_NE(CheckXattrPrefix("security.capability"), "");
  EXPECT_NE(CheckXattrPrefix("user.a b"), "");
  EXPECT_NE(CheckXattrPrefix("user." + std::string(proto::kMaxXattrPrefix, 'a')), "");
}

}  // namespace
}  // namespace xattrs_test
}  // namespace kiln::agent
