#include "images/layers/layer_export.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "common/digest.h"
#include "images/layers/layer_unpack.h"
#include "unit/images/layers/layer_test_util.h"
#include "unit/support/tar_writer.h"
#include "unit/support/temp_dir.h"

namespace kiln::images {
namespace images_layer_export_test {
namespace {

using layer_testing::Lstat;
using layer_testing::ReadAll;
using layer_testing::WriteAll;
using testutil::TarWriter;
using testutil::TempDir;

// A layer of every kind of entry UnpackLayer keeps, unpacked into `dir`.
void MakeLayer(const TempDir& tmp, const std::string& dir) {
  std::string tar = tmp / "source.tar";
  {
    TarWriter w(tar);
    w.Dir("./", {.perm = 0755, .mtime = 1600000000});
    w.Dir("./etc", {.perm = 0750, .uid = 1000, .gid = 1001, .mtime = 1600000100});
    w.File("./etc/hosts", "127.0.0.1 localhost\n", {.perm = 0644, .mtime = 1600000200});
    w.File("./usr/bin/su", "ELF", {.perm = 04755});
    w.HardLink("./usr/bin/su2", "./usr/bin/su");
    w.Symlink("./usr/bin/sh", "busybox");
    w.Fifo("./run/fifo");
    w.File("./etc/.wh.motd", "");
    w.Dir("./var/cache", {.xattrs = {{"user.kiln", "opaque-ish"}}});
    w.File("./" + std::string(150, 'n'), std::string(70000, 'x'));
  }
  auto unpacked = UnpackLayer(tar, dir);
  ASSERT_TRUE(unpacked.ok()) << unpacked.status().ToString();
}

std::string TarOf(const std::string& dir) {
  std::string out;
  Status s = WriteLayerTar(dir, [&](std::string_view d) {
    out.append(d);
    return true;
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(LayerExportTest, SameBytesEveryTimeAndDigestMatches) {
  TempDir tmp;
  MakeLayer(tmp, tmp / "layer");
  std::string a = TarOf(tmp / "layer"), b = TarOf(tmp / "layer");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  auto digest = DigestLayerTar(tmp / "layer");
  ASSERT_TRUE(digest.ok()) << digest.status().ToString();
  EXPECT_EQ(digest->size, a.size());
  EXPECT_EQ(digest->sha256, Sha256Hex(a));
}

// Unpacking the tar gives the layer back, and its tar is the same bytes: what
// lets a receiver name a layer it got by the sender's digest.
TEST(LayerExportTest, RoundTripsThroughUnpackLayer) {
  TempDir tmp;
  MakeLayer(tmp, tmp / "layer");
  std::string tar = TarOf(tmp / "layer");
  WriteAll(tmp / "export.tar", tar);
  auto back = UnpackLayer(tmp / "export.tar", tmp / "back", {.expected_diff_id = Sha256Hex(tar)});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(TarOf(tmp / "back"), tar);
  EXPECT_EQ(ReadAll(tmp / "back/etc/hosts"), "127.0.0.1 localhost\n");
  EXPECT_EQ(Lstat(tmp / "back/usr/bin/su").st_mode & 07777, 04755u);
  EXPECT_EQ(Lstat(tmp / "back/usr/bin/su").st_ino, Lstat(tmp / "back/usr/bin/su2").st_ino);
  EXPECT_TRUE(S_ISLNK(Lstat(tmp / "back/usr/bin/sh").st_mode));
  EXPECT_TRUE(S_ISFIFO(Lstat(tmp / "back/run/fifo").st_mode));
  EXPECT_TRUE(S_ISREG(Lstat(tmp / "back/etc/.wh.motd").st_mode));
  EXPECT_EQ(Lstat(tmp / "back/etc").st_uid, 1000u);
  EXPECT_EQ(Lstat(tmp / "back/etc/hosts").st_mtim.tv_sec, 1600000200);
  EXPECT_EQ(ReadAll(tmp / ("back/" + std::string(150, 'n'))).size(), 70000u);
  char value[64];
  ssize_t n = ::lgetxattr((tmp / "back/var/cache").c_str(), "user.kiln", value, sizeof value);
  if (n >= 0) {  // a file system without user xattrs keeps none
    EXPECT_EQ(std::string(value, static_cast<size_t>(n)), "opaque-ish");
  }
}

TEST(LayerExportTest, ContentChangeChangesDigest) {
  TempDir tmp;
  MakeLayer(tmp, tmp / "layer");
  auto before = DigestLayerTar(tmp / "layer");
  WriteAll(tmp / "layer/etc/hosts", "10.0.0.1 other\n");
  auto after = DigestLayerTar(tmp / "layer");
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_NE(before->sha256, after->sha256);
}

TEST(LayerExportTest, StopsWhenTheReceiverGoesAway) {
  TempDir tmp;
  MakeLayer(tmp, tmp / "layer");
  Status s = WriteLayerTar(tmp / "layer", [](std::string_view) { return false; });
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_NE(s.message().find("receiver went away"), std::string::npos) << s.message();
  EXPECT_EQ(WriteLayerTar(tmp / "missing", [](std::string_view) { return true; }).code(),
            Code::kIoError);
}

}  // namespace
}  // namespace images_layer_export_test
}  // namespace kiln::images
