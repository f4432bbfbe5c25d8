#include "images/layers/flatten.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "images/layers/layer_unpack.h"
#include "unit/images/layers/layer_test_util.h"
#include "unit/support/tar_writer.h"
#include "unit/support/temp_dir.h"

namespace kiln::images {
namespace images_flatten_test {
namespace {

using layer_testing::Exists;
using layer_testing::Lstat;
using layer_testing::ReadAll;
using testutil::TarWriter;
using testutil::TempDir;

// Every path under `root`, relative, for checks over the whole tree.
std::vector<std::string> AllPaths(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root))
    out.push_back(std::filesystem::relative(e.path(), root).string());
  return out;
}

class FlattenTest : public ::testing::Test {
 protected:
  // Unpacks the tar that `fill` writes as layer `name`; its directory.
  template <typename F>
  std::string Layer(const std::string& name, F&& fill) {
    std::string tar = tmp_ / (name + ".tar");
    {
      TarWriter w(tar);
      fill(w);
    }
    std::string dir = tmp_ / ("layers/" + name);
    auto stats = UnpackLayer(tar, dir);
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    return dir;
  }

  TempDir tmp_;
};

TEST_F(FlattenTest, ThreeLayers) {
  std::string host = tmp_ / "host";
  ASSERT_EQ(::mkdir(host.c_str(), 0755), 0);
  std::string base = Layer("base", [&](TarWriter& w) {
    w.Dir("etc", {.perm = 0755, .mtime = 1000});
    w.File("etc/passwd", "root:x:0:0");
    w.File("etc/hosts", "hosts");
    w.Symlink("etc/mtab", "/proc/mounts");
    w.File("bin/sh", std::string(50000, 's'), {.perm = 0755});
    w.File("usr/lib/a", "a");
    w.File("usr/lib/b", "b");
    w.File("opt/dir/file", "in a dir");
    w.File("var/file", "a file");
    w.Fifo("run/initctl");
    w.Symlink("evil", host);
  });
  std::string mid = Layer("mid", [&](TarWriter& w) {
    w.File("etc/.wh.hosts", "");
    w.File("usr/lib/.wh..wh..opq", "");
    w.File("usr/lib/c", "c");
    w.File("opt/dir", "now a file");        // directory -> file
    w.File("var/file/inner", "now a dir");  // file -> directory
    w.File(".wh.nothing-there", "");
  });
  std::string top = Layer("top", [&](TarWriter& w) {
    w.Dir("etc", {.perm = 0700, .mtime = 3000});
    w.File("etc/passwd", "root:x:0:0\nkiln:x:1000:1000");
    w.File("evil/x", "escape?");  // the base's symlink must be replaced, not followed
  });

  std::string dest = tmp_ / "images/one";
  auto stats = Flatten({base, mid, top}, dest);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();

  EXPECT_FALSE(Exists(dest + "/etc/hosts"));
  EXPECT_EQ(ReadAll(dest + "/etc/passwd"), "root:x:0:0\nkiln:x:1000:1000");
  EXPECT_EQ(Lstat(dest + "/etc/passwd").st_ino, Lstat(top + "/etc/passwd").st_ino);
  EXPECT_EQ(Lstat(dest + "/bin/sh").st_ino, Lstat(base + "/bin/sh").st_ino);
  EXPECT_TRUE(S_ISLNK(Lstat(dest + "/etc/mtab").st_mode));
  EXPECT_TRUE(S_ISFIFO(Lstat(dest + "/run/initctl").st_mode));
  EXPECT_FALSE(Exists(dest + "/usr/lib/a"));
  EXPECT_FALSE(Exists(dest + "/usr/lib/b"));
  EXPECT_EQ(ReadAll(dest + "/usr/lib/c"), "c");
  EXPECT_TRUE(S_ISREG(Lstat(dest + "/opt/dir").st_mode));
  EXPECT_EQ(ReadAll(dest + "/var/file/inner"), "now a dir");
  EXPECT_TRUE(S_ISDIR(Lstat(dest + "/evil").st_mode));
  EXPECT_EQ(ReadAll(dest + "/evil/x"), "escape?");
  EXPECT_FALSE(Exists(host + "/x"));
  // The topmost layer's directory metadata, applied after its contents.
  EXPECT_EQ(Lstat(dest + "/etc").st_mode & 07777, 0700u);
  EXPECT_EQ(Lstat(dest + "/etc").st_mtime, 3000);
  for (const std::string& p : AllPaths(dest)) EXPECT_EQ(p.find(".wh."), std::string::npos) << p;

  EXPECT_EQ(stats->whiteouts_applied, 2u);  // hosts and usr/lib's opaque marker
  EXPECT_EQ(stats->copied, 0u);
  // base: passwd hosts sh a b file file; mid: c dir inner; top: passwd x.
  EXPECT_EQ(stats->linked, 12u);
  EXPECT_GT(stats->dirs, 5u);

  // The layers are untouched.
  EXPECT_TRUE(Exists(base + "/etc/hosts"));
  EXPECT_TRUE(S_ISLNK(Lstat(base + "/evil").st_mode));
  EXPECT_TRUE(Exists(mid + "/etc/.wh.hosts"));
}

TEST_F(FlattenTest, FarmsShareTheLayersBytes) {
  std::string big(1 << 20, 'b');
  std::string base = Layer("base", [&](TarWriter& w) {
    w.File("data/big", big);
    w.File("data/small", "s");
  });
  std::string farm1 = tmp_ / "images/a", farm2 = tmp_ / "images/b";
  ASSERT_TRUE(Flatten({base}, farm1).ok());
  ASSERT_TRUE(Flatten({base}, farm2).ok());
  EXPECT_EQ(Lstat(base + "/data/big").st_nlink, 3u);
  EXPECT_EQ(Lstat(farm2 + "/data/big").st_ino, Lstat(base + "/data/big").st_ino);

  uint64_t layer_use = DiskUsage(base);
  EXPECT_GE(layer_use, big.size());
  EXPECT_EQ(DiskUsage(farm1), layer_use);
  EXPECT_EQ(DiskUsage(tmp_ / "images"), layer_use);  // two farms, the bytes once
  EXPECT_EQ(SharedDiskUsage({farm1, farm2, base}), layer_use);
  EXPECT_EQ(DiskUsage(tmp_ / "no-such-dir"), 0u);

  ASSERT_TRUE(RemoveTree(farm1).ok());
  EXPECT_FALSE(Exists(farm1));
  EXPECT_EQ(Lstat(base + "/data/big").st_nlink, 2u);
}

// Hard links cannot cross file systems: such files are copied.
TEST_F(FlattenTest, CopiesAcrossFileSystems) {
  struct stat shm;
  if (::stat("/dev/shm", &shm) != 0 || shm.st_dev == Lstat(tmp_.path()).st_dev)
    GTEST_SKIP() << "no second file system at /dev/shm";
  TempDir shm_dir("kiln-flatten", "/dev/shm");
  std::string other = shm_dir.path();
  std::string tar = tmp_ / "l.tar";
  {
    TarWriter w(tar);
    w.File("bin/tool", "tool", {.perm = 04755, .uid = 0, .gid = 0, .mtime = 1234});
  }
  ASSERT_TRUE(UnpackLayer(tar, other + "/layer").ok());
  auto stats = Flatten({other + "/layer"}, tmp_ / "root");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->copied, 1u);
  EXPECT_EQ(stats->linked, 0u);
  EXPECT_EQ(ReadAll(tmp_ / "root/bin/tool"), "tool");
  EXPECT_EQ(Lstat(tmp_ / "root/bin/tool").st_mode & 07777, 04755u);
  EXPECT_EQ(Lstat(tmp_ / "root/bin/tool").st_mtime, 1234);
  EXPECT_TRUE(RemoveTree(other).ok());
}

TEST_F(FlattenTest, ErrorsLeaveNothing) {
  std::string base = Layer("base", [](TarWriter& w) { w.File("a", "a"); });
  std::string bad = Layer("bad", [](TarWriter& w) { w.File("d/.wh..", ""); });

  auto dotdot = Flatten({base, bad}, tmp_ / "dotdot");
  ASSERT_FALSE(dotdot.ok());
  EXPECT_EQ(dotdot.status().code(), Code::kInvalidImage);
  EXPECT_NE(dotdot.status().message().find("d/.wh.."), std::string::npos);
  EXPECT_FALSE(Exists(tmp_ / "dotdot"));
  EXPECT_TRUE(Exists(base + "/a"));

  auto missing = Flatten({base, tmp_ / "layers/none"}, tmp_ / "missing");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_FALSE(Exists(tmp_ / "missing"));

  ASSERT_TRUE(Flatten({base}, tmp_ / "done").ok());
  EXPECT_EQ(Flatten({base}, tmp_ / "done").status().code(), Code::kFileExists);
  EXPECT_TRUE(Exists(tmp_ / "done/a"));
}

TEST(RemoveTreeTest, DoesNotFollowSymlinks) {
  TempDir tmp;
  std::string outside = tmp / "outside";
  ASSERT_EQ(::mkdir(outside.c_str(), 0755), 0);
  layer_testing::WriteAll(outside + "/keep", "k");
  std::string tree = tmp / "tree";
  ASSERT_EQ(::mkdir(tree.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((tree + "/ro").c_str(), 0555), 0);
  ASSERT_EQ(::symlink(outside.c_str(), (tree + "/link").c_str()), 0);
  ASSERT_EQ(::symlink(outside.c_str(), (tree + "/ro-link").c_str()), 0);
  EXPECT_TRUE(RemoveTree(tree + "/").ok());
  EXPECT_FALSE(Exists(tree));
  EXPECT_EQ(ReadAll(outside + "/keep"), "k");
  EXPECT_TRUE(RemoveTree(tree).ok());  // already gone
  EXPECT_EQ(RemoveTree("/").code(), Code::kInvalidRequest);
  EXPECT_EQ(RemoveTree("").code(), Code::kInvalidRequest);
}

}  // namespace
}  // namespace images_flatten_test
}  // namespace kiln::images
