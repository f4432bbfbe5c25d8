#include "images/layers/layer_unpack.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>

#include "common/digest.h"
#include "unit/images/layers/layer_test_util.h"
#include "unit/support/tar_writer.h"
#include "unit/support/temp_dir.h"

namespace kiln::images {
namespace images_layer_unpack_test {
namespace {

using layer_testing::Exists;
using layer_testing::Lstat;
using layer_testing::ReadAll;
using testutil::Compression;
using testutil::TarWriter;
using testutil::TempDir;

std::string GetXattr(const std::string& path, const std::string& name) {
  char buf[256];
  ssize_t n = ::lgetxattr(path.c_str(), name.c_str(), buf, sizeof buf);
  return n < 0 ? "<none>" : std::string(buf, static_cast<size_t>(n));
}

TEST(CleanLayerPathTest, CleansAndRefusesEscapes) {
  EXPECT_EQ(CleanLayerPath("./a//b/./c/"), "a/b/c");
  EXPECT_EQ(CleanLayerPath("a/../b"), "b");
  EXPECT_EQ(CleanLayerPath("./"), "");
  EXPECT_EQ(CleanLayerPath("a/.."), "");
  EXPECT_EQ(CleanLayerPath("../x"), std::nullopt);
  EXPECT_EQ(CleanLayerPath("a/../../x"), std::nullopt);
  EXPECT_EQ(CleanLayerPath("/etc/passwd"), std::nullopt);
}

TEST(UnpackLayerTest, EveryEntryType) {
  TempDir tmp;
  std::string tar = tmp / "layer.tar";
  {
    TarWriter w(tar);
    w.Dir("./", {.perm = 0755, .mtime = 1600000000});
    w.Dir("./etc", {.perm = 0750, .uid = 1000, .gid = 1001, .mtime = 1600000100});
    w.File("./etc/hosts", "127.0.0.1 localhost\n", {.perm = 0644, .mtime = 1600000200});
    w.File("./usr/bin/su", "ELF", {.perm = 04755, .uid = 0, .gid = 0});
    w.File("./usr/bin/newgrp", "ELF2", {.perm = 02755, .uid = 1234, .gid = 42});
    w.Dir("./tmp", {.perm = 01777});
    w.HardLink("./usr/bin/su2", "./usr/bin/su");
    w.Symlink("./etc/localtime", "/usr/share/zoneinfo/UTC",
              {.uid = 7, .gid = 8, .mtime = 1500000000});
    w.Fifo("./run/fifo", {.perm = 0620, .mtime = 1600000300});
    w.File("./bin/ping", "PING",
           {.perm = 0755, .xattrs = {{"user.kiln", "yes"}, {"trusted.overlay.origin", "x"}}});
    w.Device("./dev/null", AE_IFCHR, 1, 3);
    w.Device("./dev/sda", AE_IFBLK, 8, 0);
    w.Close();
    ASSERT_TRUE(w.ok());
  }
  std::string dest = tmp / "out";
  auto stats = UnpackLayer(tar, dest);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->files, 5u);  // hosts, su, newgrp, ping, the link su2
  EXPECT_EQ(stats->bytes, 20u + 3 + 4 + 4);
  EXPECT_EQ(stats->devices_skipped, 2u);
  EXPECT_EQ(stats->whiteouts, 0u);
  EXPECT_EQ(stats->diff_id, FileSha256Hex(tar));
  EXPECT_EQ(stats->blob_sha256, stats->diff_id);  // not compressed

  EXPECT_EQ(ReadAll(dest + "/etc/hosts"), "127.0.0.1 localhost\n");
  EXPECT_EQ(Lstat(dest + "/etc/hosts").st_mtime, 1600000200);
  EXPECT_EQ(Lstat(dest + "/etc").st_mode & 07777, 0750u);
  // Written into after it was created, yet with the tar's mtime.
  EXPECT_EQ(Lstat(dest + "/etc").st_mtime, 1600000100);
  EXPECT_EQ(Lstat(dest).st_mtime, 1600000000);
  EXPECT_EQ(Lstat(dest + "/tmp").st_mode & 07777, 01777u);
  EXPECT_EQ(Lstat(dest + "/usr/bin/su").st_mode & 07777, 04755u);
  EXPECT_EQ(Lstat(dest + "/usr/bin/newgrp").st_mode & 07777, 02755u);
  EXPECT_EQ(Lstat(dest + "/usr/bin/su").st_ino, Lstat(dest + "/usr/bin/su2").st_ino);
  EXPECT_EQ(Lstat(dest + "/usr/bin/su").st_nlink, 2u);
  EXPECT_TRUE(S_ISLNK(Lstat(dest + "/etc/localtime").st_mode));
  char target[256] = {};
  ASSERT_GT(::readlink((dest + "/etc/localtime").c_str(), target, sizeof target - 1), 0);
  EXPECT_STREQ(target, "/usr/share/zoneinfo/UTC");
  EXPECT_EQ(Lstat(dest + "/etc/localtime").st_mtime, 1500000000);
  EXPECT_TRUE(S_ISFIFO(Lstat(dest + "/run/fifo").st_mode));
  EXPECT_EQ(Lstat(dest + "/run/fifo").st_mode & 07777, 0620u);
  EXPECT_EQ(Lstat(dest + "/run/fifo").st_mtime, 1600000300);
  EXPECT_EQ(GetXattr(dest + "/bin/ping", "user.kiln"), "yes");
  EXPECT_FALSE(Exists(dest + "/dev/null"));
  EXPECT_FALSE(Exists(dest + "/dev/sda"));
  if (::geteuid() == 0) {
    EXPECT_EQ(GetXattr(dest + "/bin/ping", "trusted.overlay.origin"), "<none>");
  }
}

TEST(UnpackLayerTest, ImpliedDirectoriesIgnoreTheUmask) {
  TempDir tmp;
  std::string tar = tmp / "layer.tar";
  {
    TarWriter w(tar);
    w.File("a/b/c", "c");
  }
  mode_t old = ::umask(077);
  auto stats = UnpackLayer(tar, tmp / "out");
  ::umask(old);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(Lstat(tmp / "out").st_mode & 07777, 0755u);
  EXPECT_EQ(Lstat(tmp / "out/a/b").st_mode & 07777, 0755u);
}

TEST(UnpackLayerTest, OwnershipAndSetuidSurviveChown) {
  if (::geteuid() != 0) GTEST_SKIP() << "ownership needs root";
  TempDir tmp;
  std::string tar = tmp / "layer.tar";
  {
    TarWriter w(tar);
    w.Dir("home/u", {.perm = 0700, .uid = 1000, .gid = 1000});
    w.File("usr/bin/tool", "x", {.perm = 06755, .uid = 1234, .gid = 4321});
    w.Symlink("home/u/link", "nowhere", {.uid = 1000, .gid = 1000});
    w.Fifo("home/u/fifo", {.perm = 0600, .uid = 1000, .gid = 1000});
  }
  std::string dest = tmp / "out";
  ASSERT_TRUE(UnpackLayer(tar, dest).ok());
  struct stat tool = Lstat(dest + "/usr/bin/tool");
  EXPECT_EQ(tool.st_uid, 1234u);
  EXPECT_EQ(tool.st_gid, 4321u);
  EXPECT_EQ(tool.st_mode & 07777, 06755u);
  EXPECT_EQ(Lstat(dest + "/home/u").st_uid, 1000u);
  EXPECT_EQ(Lstat(dest + "/home/u/link").st_uid, 1000u);
  EXPECT_EQ(Lstat(dest + "/home/u/fifo").st_gid, 1000u);
  EXPECT_EQ(Lstat(dest + "/usr").st_uid, 0u);  // implied parents: root's, 0755
  EXPECT_EQ(Lstat(dest + "/usr").st_mode & 07777, 0755u);
}

// `runsc tar rootfs-upper` writes deletions as overlayfs does: 0/0 character
// devices (later ones as hard links to the first) and an opaque xattr.
TEST(UnpackLayerTest, OverlayWhiteoutsBecomeOciWhiteouts) {
  TempDir tmp;
  std::string tar = tmp / "upper.tar";
  {
    TarWriter w(tar);
    w.Dir("./etc");
    w.Device("./etc/apt", AE_IFCHR, 0, 0);
    w.Dir("./usr/bin");
    w.HardLink("./usr/bin/zcat", "./etc/apt");
    w.Dir("./var/cache", {.xattrs = {{"trusted.overlay.opaque", "y"}}});
    w.File("./var/cache/new", "n");
  }
  std::string dest = tmp / "out";
  auto stats = UnpackLayer(tar, dest);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->whiteouts, 3u);
  EXPECT_EQ(stats->devices_skipped, 0u);
  EXPECT_EQ(stats->files, 1u);
  for (const char* marker : {"/etc/.wh.apt", "/usr/bin/.wh.zcat", "/var/cache/.wh..wh..opq"}) {
    struct stat st = Lstat(dest + marker);
    EXPECT_TRUE(S_ISREG(st.st_mode)) << marker;
    EXPECT_EQ(st.st_size, 0) << marker;
  }
  EXPECT_FALSE(Exists(dest + "/etc/apt"));
  EXPECT_FALSE(Exists(dest + "/usr/bin/zcat"));
  EXPECT_EQ(ReadAll(dest + "/var/cache/new"), "n");
  EXPECT_EQ(GetXattr(dest + "/var/cache", "trusted.overlay.opaque"), "<none>");
}

// The same as above, the tar written by GNU tar from a real overlayfs-style
// upper directory (GNU tar stores the device's second name as a device
// again; the hard-link form runsc writes is covered by the test above).
TEST(UnpackLayerTest, GnuTarOfAnOverlayUpper) {
  if (::geteuid() != 0) GTEST_SKIP() << "mknod and trusted.* xattrs need root";
  TempDir tmp;
  std::string upper = tmp / "upper";
  for (const char* dir : {"", "/etc", "/usr", "/usr/bin", "/var", "/var/lib"})
    ASSERT_EQ(::mkdir((upper + dir).c_str(), 0755), 0) << dir;
  ASSERT_EQ(::mknod((upper + "/etc/apt").c_str(), S_IFCHR | 0, ::makedev(0, 0)), 0);
  ASSERT_EQ(::link((upper + "/etc/apt").c_str(), (upper + "/usr/bin/zcat").c_str()), 0);
  ASSERT_EQ(::setxattr((upper + "/var/lib").c_str(), "trusted.overlay.opaque", "y", 1, 0), 0);
  layer_testing::WriteAll(upper + "/var/lib/new", "hi\n");
  std::string tar =
      "tar --xattrs --xattrs-include='*' -C " + upper + " -cf " + (tmp / "upper.tar") + " .";
  ASSERT_EQ(std::system(tar.c_str()), 0);
  auto stats = UnpackLayer(tmp / "upper.tar", tmp / "out");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->whiteouts, 3u);
  EXPECT_TRUE(S_ISREG(Lstat(tmp / "out/etc/.wh.apt").st_mode));
  EXPECT_TRUE(S_ISREG(Lstat(tmp / "out/usr/bin/.wh.zcat").st_mode));
  EXPECT_TRUE(Exists(tmp / "out/var/lib/.wh..wh..opq"));
  EXPECT_FALSE(Exists(tmp / "out/usr/bin/zcat"));
  EXPECT_EQ(ReadAll(tmp / "out/var/lib/new"), "hi\n");
}

TEST(UnpackLayerTest, OciWhiteoutsKeptAsFiles) {
  TempDir tmp;
  std::string tar = tmp / "layer.tar";
  {
    TarWriter w(tar);
    w.File("etc/.wh.motd", "");
    w.File("opt/.wh..wh..opq", "");
  }
  auto stats = UnpackLayer(tar, tmp / "out");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->whiteouts, 2u);
  EXPECT_EQ(stats->files, 0u);
  EXPECT_TRUE(Exists(tmp / "out/etc/.wh.motd"));
  EXPECT_TRUE(Exists(tmp / "out/opt/.wh..wh..opq"));
}

struct EscapeCase {
  const char* name;
  void (*write)(TarWriter&, const std::string& outside);
  const char* entry;  // named in the error
};

class UnpackEscapeTest : public ::testing::TestWithParam<EscapeCase> {};

TEST_P(UnpackEscapeTest, RefusedAndNothingLeft) {
  TempDir tmp;
  std::string outside = tmp / "outside";
  ASSERT_EQ(::mkdir(outside.c_str(), 0755), 0);
  std::string tar = tmp / "evil.tar";
  {
    TarWriter w(tar);
    w.File("ok", "fine");
    GetParam().write(w, outside);
  }
  std::string dest = tmp / "layers/out";
  auto stats = UnpackLayer(tar, dest);
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), Code::kInvalidImage);
  EXPECT_NE(stats.status().message().find(GetParam().entry), std::string::npos)
      << stats.status().message();
  EXPECT_FALSE(Exists(dest));
  EXPECT_FALSE(Exists(outside + "/x"));
  EXPECT_FALSE(Exists(tmp / "x"));
}

INSTANTIATE_TEST_SUITE_P(
    Paths, UnpackEscapeTest,
    ::testing::Values(
        EscapeCase{"dotdot", [](TarWriter& w, const std::string&) { w.File("../../x", "e"); },
                   "../../x"},
        EscapeCase{"absolute", [](TarWriter& w, const std::string& o) { w.File(o + "/x", "e"); },
                   "/x"},
        EscapeCase{"symlink_dir",
                   [](TarWriter& w, const std::string& o) {
                     w.Symlink("link", o);
                     w.File("link/x", "e");
                   },
                   "link/x"},
        EscapeCase{"symlink_relative",
                   [](TarWriter& w, const std::string&) {
                     w.Symlink("up", "../..");
                     w.File("up/x", "e");
                   },
                   "up/x"},
        EscapeCase{"hardlink_out",
                   [](TarWriter& w, const std::string&) { w.HardLink("h", "../../etc/passwd"); },
                   "h"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(UnpackLayerTest, DigestsCheckedForGzipAndZstd) {
  TempDir tmp;
  std::string plain = tmp / "layer.tar";
  {
    TarWriter w(plain);
    w.Dir("app");
    w.File("app/main.py", std::string(100000, 'p'));
  }
  ASSERT_EQ(std::system(("gzip -k -n " + plain + " && zstd -q -k " + plain).c_str()), 0);
  std::string diff_id = FileSha256Hex(plain);
  int n = 0;
  for (std::string blob : {plain + ".gz", plain + ".zst", plain}) {
    std::string blob_sha = FileSha256Hex(blob);
    UnpackOptions ok_opts{.expected_blob_sha256 = "sha256:" + blob_sha,
                          .expected_diff_id = diff_id};
    std::string dest = tmp / ("ok" + std::to_string(n++));
    auto stats = UnpackLayer(blob, dest, ok_opts);
    ASSERT_TRUE(stats.ok()) << blob << ": " << stats.status().ToString();
    EXPECT_EQ(stats->blob_sha256, blob_sha);
    EXPECT_EQ(stats->diff_id, diff_id) << blob;
    EXPECT_EQ(ReadAll(dest + "/app/main.py"), std::string(100000, 'p'));

    std::string wrong(64, '0');
    for (UnpackOptions bad :
         {UnpackOptions{.expected_blob_sha256 = wrong}, UnpackOptions{.expected_diff_id = wrong}}) {
      std::string bad_dest = tmp / "bad";
      auto refused = UnpackLayer(blob, bad_dest, bad);
      ASSERT_FALSE(refused.ok()) << blob;
      EXPECT_EQ(refused.status().code(), Code::kInvalidImage);
      EXPECT_NE(refused.status().message().find(wrong), std::string::npos);
      EXPECT_FALSE(Exists(bad_dest));
    }
  }
}

TEST(UnpackLayerTest, MaxBytes) {
  TempDir tmp;
  std::string tar = tmp / "layer.tar";
  {
    TarWriter w(tar);
    w.File("a", std::string(600, 'a'));
    w.File("b", std::string(400, 'b'));
  }
  auto over = UnpackLayer(tar, tmp / "over", {.max_bytes = 999});
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), Code::kQuotaExceeded);
  EXPECT_NE(over.status().message().find("999"), std::string::npos);
  EXPECT_FALSE(Exists(tmp / "over"));
  auto fits = UnpackLayer(tar, tmp / "fits", {.max_bytes = 1000});
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_EQ(fits->bytes, 1000u);
}

TEST(UnpackLayerTest, SkipPrefixes) {
  TempDir tmp;
  std::string tar = tmp / "layer.tar";
  {
    TarWriter w(tar);
    w.Dir("opt/kiln");
    w.File("opt/kiln/agent", "agent");
    w.File("opt/kilnx", "kept");
    w.Symlink("run/kiln", "/host");
    w.HardLink("opt/agent-link", "opt/kiln/agent");
  }
  auto stats = UnpackLayer(tar, tmp / "out", {.skip_prefixes = {"opt/kiln", "run/kiln"}});
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_FALSE(Exists(tmp / "out/opt/kiln"));
  EXPECT_FALSE(Exists(tmp / "out/run/kiln"));
  EXPECT_FALSE(Exists(tmp / "out/opt/agent-link"));
  EXPECT_EQ(ReadAll(tmp / "out/opt/kilnx"), "kept");
}

TEST(UnpackLayerTest, LaterEntriesReplaceEarlierOnes) {
  TempDir tmp;
  std::string tar = tmp / "layer.tar";
  {
    TarWriter w(tar);
    w.File("a", "file first");
    w.Dir("a");
    w.File("a/b", "inside");
    w.Dir("c");
    w.File("c/old", "x");
    w.File("c", "now a file");
  }
  ASSERT_TRUE(UnpackLayer(tar, tmp / "out").ok());
  EXPECT_EQ(ReadAll(tmp / "out/a/b"), "inside");
  EXPECT_EQ(ReadAll(tmp / "out/c"), "now a file");
}

TEST(UnpackLayerTest, ErrorsLeaveNothing) {
  TempDir tmp;
  layer_testing::WriteAll(tmp / "garbage.tar", std::string(3000, 'g'));
  auto garbage = UnpackLayer(tmp / "garbage.tar", tmp / "g");
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), Code::kInvalidImage);
  EXPECT_FALSE(Exists(tmp / "g"));

  // A gzip stream cut short: the entries begin, the data ends early.
  std::string tar = tmp / "layer.tar";
  {
    TarWriter w(tar, Compression::kGzip);
    std::string noise;
    for (int i = 0; i < 200000; ++i) noise += static_cast<char>((i * 7919) % 251);
    w.File("big", noise);
  }
  std::string full = ReadAll(tar);
  layer_testing::WriteAll(tmp / "cut.tar.gz", full.substr(0, full.size() / 2));
  auto cut = UnpackLayer(tmp / "cut.tar.gz", tmp / "c");
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), Code::kInvalidImage) << cut.status().ToString();
  EXPECT_FALSE(Exists(tmp / "c"));

  auto missing = UnpackLayer(tmp / "nope.tar", tmp / "m");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_FALSE(Exists(tmp / "m"));

  ASSERT_EQ(::mkdir((tmp / "exists").c_str(), 0755), 0);
  layer_testing::WriteAll(tmp / "exists/keep", "k");
  auto exists = UnpackLayer(tar, tmp / "exists");
  EXPECT_EQ(exists.status().code(), Code::kFileExists);
  EXPECT_EQ(ReadAll(tmp / "exists/keep"), "k");
}

}  // namespace
}  // namespace images_layer_unpack_test
}  // namespace kiln::images
