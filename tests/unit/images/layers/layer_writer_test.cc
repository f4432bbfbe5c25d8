// The layer writer's entry points for writers that are not tars
// (images/layers/layer_writer.h): Put, OpenDir with its DirWalk, and
// FinishDirs. The tar entry point is tested through UnpackLayer
// (layer_unpack_test.cc), COPY's use of it in copy_step_test.cc.
#include "images/layers/layer_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "unit/images/layers/layer_test_util.h"
#include "unit/support/temp_dir.h"

namespace kiln::images {
namespace images_layer_writer_test {
namespace {

using layer_testing::Exists;
using layer_testing::Lstat;
using layer_testing::ReadAll;
using testutil::TempDir;

class LayerWriterTest : public ::testing::Test {
 protected:
  LayerWriterTest() : root_(::open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {}

  static LayerNode Node(mode_t type, mode_t mode, time_t mtime) {
    LayerNode node;
    node.type = type;
    node.mode = mode;
    node.mtime = {mtime, 0};
    return node;
  }

  TempDir dir_;
  UniqueFd root_;
  const UnpackOptions options_{};
  LayerWriter writer_{options_, root_.get()};
};

TEST_F(LayerWriterTest, PutWritesFilesDirectoriesAndSymlinks) {
  Result<UniqueFd> app = writer_.Put(root_.get(), "app", "/app", Node(S_IFDIR, 0750, 1000));
  ASSERT_TRUE(app.ok()) << app.status().ToString();
  ASSERT_GE(app->get(), 0);
  auto data = [](int fd) {
    return ::write(fd, "hello\n", 6) == 6 ? Status::Ok() : Status(Code::kIoError, "write");
  };
  Result<UniqueFd> file =
      writer_.Put(app->get(), "run.sh", "/app/run.sh", Node(S_IFREG, 04755, 2000), data);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_LT(file->get(), 0);  // only a directory's fd is given back
  LayerNode link = Node(S_IFLNK, 0, 3000);
  link.link_target = "run.sh";
  ASSERT_TRUE(writer_.Put(app->get(), "link", "/app/link", link).ok());
  ASSERT_TRUE(writer_.FinishDirs().ok());

  EXPECT_EQ(ReadAll(dir_ / "app/run.sh"), "hello\n");
  EXPECT_EQ(Lstat(dir_ / "app/run.sh").st_mode & 07777, 04755u);  // setuid kept
  EXPECT_EQ(Lstat(dir_ / "app/run.sh").st_mtim.tv_sec, 2000);
  EXPECT_EQ(std::filesystem::read_symlink(dir_ / "app/link"), "run.sh");
  EXPECT_EQ(Lstat(dir_ / "app/link").st_mtim.tv_sec, 3000);
  // The directory's mode and mtime come last, after the entries written into it.
  EXPECT_EQ(Lstat(dir_ / "app").st_mode & 07777, 0750u);
  EXPECT_EQ(Lstat(dir_ / "app").st_mtim.tv_sec, 1000);
}

TEST_F(LayerWriterTest, ADirectoryWithoutWriteOrSearchBitsStillTakesItsEntries) {
  // Deepest first: a 0640 parent would otherwise close its child to the walk.
  Result<UniqueFd> a = writer_.Put(root_.get(), "a", "a", Node(S_IFDIR, 0640, 10));
  ASSERT_TRUE(a.ok());
  Result<UniqueFd> b = writer_.Put(a->get(), "b", "a/b", Node(S_IFDIR, 0555, 20));
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(writer_.Put(b->get(), "f", "a/b/f", Node(S_IFREG, 0444, 30)).ok());
  ASSERT_TRUE(writer_.FinishDirs().ok());
  EXPECT_EQ(Lstat(dir_ / "a").st_mode & 07777, 0640u);
  if (::geteuid() == 0) {  // without root, a/ is closed to the test too
    EXPECT_EQ(Lstat(dir_ / "a/b").st_mode & 07777, 0555u);
    EXPECT_EQ(Lstat(dir_ / "a/b").st_mtim.tv_sec, 20);
    EXPECT_TRUE(Exists(dir_ / "a/b/f"));
  }
}

TEST_F(LayerWriterTest, PutReplacesWhatIsInTheWayButKeepsADirectory) {
  ASSERT_TRUE(writer_.Put(root_.get(), "x", "x", Node(S_IFREG, 0644, 1)).ok());
  Result<UniqueFd> x = writer_.Put(root_.get(), "x", "x", Node(S_IFDIR, 0755, 2));
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  ASSERT_TRUE(writer_.Put(x->get(), "kept", "x/kept", Node(S_IFREG, 0644, 3)).ok());
  // A directory again where one is: what it holds stays.
  ASSERT_TRUE(writer_.Put(root_.get(), "x", "x", Node(S_IFDIR, 0700, 4)).ok());
  ASSERT_TRUE(writer_.FinishDirs().ok());
  EXPECT_TRUE(Exists(dir_ / "x/kept"));
  EXPECT_EQ(Lstat(dir_ / "x").st_mode & 07777, 0700u);  // the last one's mode
  EXPECT_EQ(Lstat(dir_ / "x").st_mtim.tv_sec, 4);
}

TEST_F(LayerWriterTest, OpenDirMakesMissingDirectoriesAsTheWalkSays) {
  std::vector<std::string> made;
  LayerWriter::DirWalk walk;
  walk.made = [&](const std::string& path) {
    made.push_back(path);
    return Node(S_IFDIR, path == "usr" ? 0711 : 0755, 5000);
  };
  Result<UniqueFd> bin = writer_.OpenDir("usr/local/bin", true, "/usr/local/bin", walk);
  ASSERT_TRUE(bin.ok()) << bin.status().ToString();
  EXPECT_EQ(made, (std::vector<std::string>{"usr", "usr/local", "usr/local/bin"}));
  EXPECT_EQ(Lstat(dir_ / "usr").st_mode & 07777, 0711u);
  EXPECT_EQ(Lstat(dir_ / "usr/local/bin").st_mtim.tv_sec, 5000);
  // Without a walk, a made directory is 0755 whatever the umask.
  mode_t old = ::umask(077);
  Result<UniqueFd> opt = writer_.OpenDir("opt/tool", true, "opt/tool");
  ::umask(old);
  ASSERT_TRUE(opt.ok());
  EXPECT_EQ(Lstat(dir_ / "opt/tool").st_mode & 07777, 0755u);
}

TEST_F(LayerWriterTest, OpenDirNeverGoesThroughASymlinkOrAFile) {
  ASSERT_EQ(::symlink("/", (dir_ / "escape").c_str()), 0);
  ASSERT_TRUE(writer_.Put(root_.get(), "file", "file", Node(S_IFREG, 0644, 1)).ok());
  Result<UniqueFd> through = writer_.OpenDir("escape/etc", true, "escape/etc/x");
  ASSERT_FALSE(through.ok());
  EXPECT_EQ(through.status().code(), Code::kInvalidImage);
  EXPECT_FALSE(Exists("/etc/x"));
  LayerWriter::DirWalk walk;
  walk.blocked = [](const std::string& path) {
    return Status(Code::kInvalidRequest, "blocked at " + path);
  };
  Result<UniqueFd> under_file = writer_.OpenDir("file/sub", true, "/file/sub", walk);
  ASSERT_FALSE(under_file.ok());
  EXPECT_EQ(under_file.status().code(), Code::kInvalidRequest);
  EXPECT_EQ(under_file.status().message(), "blocked at file");
}

TEST_F(LayerWriterTest, FinishDirsPassesOverADirectoryReplacedSince) {
  Result<UniqueFd> d = writer_.Put(root_.get(), "d", "/d", Node(S_IFDIR, 0700, 7));
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(writer_.Put(root_.get(), "d", "/d", Node(S_IFREG, 0600, 8)).ok());
  ASSERT_TRUE(writer_.FinishDirs().ok());
  EXPECT_TRUE(S_ISREG(Lstat(dir_ / "d").st_mode));
  EXPECT_EQ(Lstat(dir_ / "d").st_mode & 07777, 0600u);
}

}  // namespace
}  // namespace images_layer_writer_test
}  // namespace kiln::images
