// Build contexts: unpacking untrusted tars (escapes, limits, .dockerignore),
// deterministic packing, and the in-root path helpers underneath.
#include "images/context/build_context.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/digest.h"
#include "images/context/safe_path.h"
#include "unit/support/images_test_util.h"
#include "unit/support/temp_dir.h"

namespace kiln::images {
namespace images_context_test {
namespace {

using testing::ModeOf;
using testing::ReadFile;
using testing::TarEntry;
using testing::WriteFile;
using testing::WriteTar;
using testutil::TempDir;
namespace fs = std::filesystem;

TEST(SafePathTest, CleanPath) {
  EXPECT_EQ(CleanPath("a/./b/../c"), "/a/c");
  EXPECT_EQ(CleanPath("/../../x"), "/x");
  EXPECT_EQ(CleanPath(".."), "/");
  EXPECT_EQ(CleanPath(""), "/");
  EXPECT_EQ(CleanPath("//a//b/"), "/a/b");
  EXPECT_TRUE(EscapesRoot("../x"));
  EXPECT_TRUE(EscapesRoot("a/../../x"));
  EXPECT_FALSE(EscapesRoot("a/../b"));
  EXPECT_FALSE(EscapesRoot("./a/."));
}

TEST(SafePathTest, OpenInRootKeepsSymlinksInside) {
  TempDir root;
  WriteFile(root / "etc/hostname", "inside\n");
  fs::create_symlink("../../../../../../etc", root / "up");  // climbs "out"
  fs::create_symlink("/etc/hostname", root / "abs");
  for (const char* path : {"/up/hostname", "abs", "/../../etc/hostname"}) {
    Result<UniqueFd> fd = OpenInRoot(root.path(), path, O_RDONLY);
    ASSERT_TRUE(fd.ok()) << path << ": " << fd.status().ToString();
    char buf[64] = {};
    ASSERT_GT(::read(fd->get(), buf, sizeof(buf) - 1), 0);
    EXPECT_STREQ(buf, "inside\n") << path;
  }
  // The host has /etc/passwd; the root does not.
  Result<UniqueFd> fd = OpenInRoot(root.path(), "/up/passwd", O_RDONLY);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), Code::kFileNotFound);
  EXPECT_EQ(fd.status().details()["path"], "/up/passwd");
  EXPECT_EQ(OpenInRoot(root / "missing", "x", O_RDONLY).status().code(), Code::kFileNotFound);
  // Directory flags (O_DIRECTORY shares bits with O_TMPFILE) and the root itself.
  EXPECT_TRUE(OpenInRoot(root.path(), "", O_PATH | O_DIRECTORY).ok());
  EXPECT_TRUE(OpenInRoot(root.path(), "/up", O_RDONLY | O_DIRECTORY).ok());
  EXPECT_EQ(OpenInRoot(root.path(), "abs", O_RDONLY | O_DIRECTORY).status().code(),
            Code::kFileNotFound);  // ENOTDIR
}

class UnpackTest : public ::testing::Test {
 protected:
  TempDir dir_;  // first: the paths below are made from it
  std::string tar_ = dir_ / "ctx.tar.gz";
  std::string dest_ = dir_ / "ctx";

  Result<ContextStats> Unpack(const std::vector<TarEntry>& entries, ContextLimits limits = {},
                              const DockerIgnore* ignore = nullptr, bool gzip = true) {
    WriteTar(tar_, entries, gzip);
    return UnpackContext(tar_, dest_, limits, ignore);
  }
};

TEST_F(UnpackTest, UnpacksFilesDirsLinksWithModes) {
  for (bool gzip : {true, false}) {
    fs::remove_all(dest_);
    Result<ContextStats> stats = Unpack({{"Dockerfile", 'f', "FROM scratch\n", 0644, 1000, 1000},
                                         {"bin", 'd', "", 0750},
                                         {"bin/run.sh", 'f', "#!/bin/sh\n", 0755, 1000, 1000},
                                         {"./src/deep/a.py", 'f', "print(1)\n", 0600},
                                         {"link", 'l', "/etc/passwd"},
                                         {"hard", 'h', "bin/run.sh"}},
                                        {}, nullptr, gzip);
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    EXPECT_EQ(stats->files, 6u);
    EXPECT_EQ(stats->bytes, 13u + 10u + 9u);
    EXPECT_EQ(ReadFile(dest_ + "/src/deep/a.py"), "print(1)\n");
    EXPECT_EQ(ModeOf(dest_ + "/bin/run.sh"), 0755u);
    EXPECT_EQ(ModeOf(dest_ + "/src/deep/a.py"), 0600u);
    EXPECT_EQ(ModeOf(dest_ + "/bin"), 0750u);
    EXPECT_EQ(ModeOf(dest_ + "/src"), 0755u);  // implied parents
    EXPECT_EQ(ModeOf(dest_), 0755u);
    EXPECT_EQ(fs::read_symlink(dest_ + "/link"), "/etc/passwd");
    EXPECT_EQ(ReadFile(dest_ + "/hard"), "#!/bin/sh\n");
    if (::geteuid() == 0) {
      struct stat st;
      ASSERT_EQ(::stat((dest_ + "/bin/run.sh").c_str(), &st), 0);
      EXPECT_EQ(st.st_uid, 0u);  // the tar said 1000: contexts are owned by root
      EXPECT_EQ(st.st_gid, 0u);
    }
  }
}

TEST_F(UnpackTest, EscapesAreRefusedAndLeaveNothing) {
  const struct {
    std::vector<TarEntry> entries;
    const char* entry;
  } cases[] = {
      {{{"ok", 'f', "x"}, {"../x", 'f', "evil"}}, "../x"},
      {{{"a/../../x", 'f', "evil"}}, "a/../../x"},
      {{{"/abs", 'f', "evil"}}, "/abs"},
      {{{"d", 'l', dir_.path()}, {"d/x", 'f', "evil"}}, "d/x"},  // through a symlink
      {{{"d", 'l', "."}, {"d/x", 'f', "evil"}}, "d/x"},          // even one that stays inside
      {{{"h", 'h', "../../etc/passwd"}}, "h"},
      {{{"h", 'h', "/etc/passwd"}}, "h"},
      {{{"h", 'h', "missing"}}, "h"},
      {{{"null", 'c', ""}}, "null"},
      {{{"f", 'f', "x"}, {"f/y", 'f', "x"}}, "f/y"},
  };
  for (const auto& c : cases) {
    Result<ContextStats> stats = Unpack(c.entries);
    ASSERT_FALSE(stats.ok()) << c.entry;
    EXPECT_EQ(stats.status().code(), Code::kInvalidArchive) << stats.status().ToString();
    EXPECT_NE(stats.status().message().find(std::string("context entry ") + c.entry),
              std::string::npos)
        << stats.status().message();
    EXPECT_EQ(stats.status().details()["entry"], c.entry);
    EXPECT_FALSE(fs::exists(fs::symlink_status(dest_))) << c.entry;
  }
  EXPECT_FALSE(fs::exists(dir_ / "x"));
  EXPECT_FALSE(fs::exists(dir_ / "evil"));
}

TEST_F(UnpackTest, Limits) {
  ContextLimits limits;
  limits.max_files = 2;
  Result<ContextStats> stats = Unpack({{"a", 'f', "1"}, {"b", 'f', "2"}, {"c", 'f', "3"}}, limits);
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), Code::kPayloadTooLarge);
  EXPECT_EQ(stats.status().details()["limit"], "files");
  EXPECT_EQ(stats.status().details()["max"], 2);
  EXPECT_FALSE(fs::exists(dest_));
  EXPECT_TRUE(Unpack({{"a", 'f', "1"}, {"b", 'f', "2"}}, limits).ok());

  fs::remove_all(dest_);
  limits = {};
  limits.max_unpacked = 10;
  stats = Unpack({{"a", 'f', "12345"}, {"b", 'f', "123456"}}, limits);
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), Code::kPayloadTooLarge);
  EXPECT_EQ(stats.status().details()["limit"], "unpackedBytes");
  EXPECT_EQ(stats.status().details()["max"], 10);
  EXPECT_FALSE(fs::exists(dest_));

  limits = {};
  limits.max_compressed = 64;
  stats = Unpack({{"a", 'f', std::string(1000, 'x')}}, limits, nullptr, /*gzip=*/false);
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), Code::kPayloadTooLarge);
  EXPECT_EQ(stats.status().details()["limit"], "compressedBytes");
  EXPECT_EQ(stats.status().details()["max"], 64);
  EXPECT_FALSE(fs::exists(dest_));
}

TEST_F(UnpackTest, DestMustNotExistAndTarMustBeValid) {
  fs::create_directories(dest_);
  WriteFile(dest_ + "/keep", "mine");
  WriteTar(tar_, {{"a", 'f', "1"}});
  Result<ContextStats> stats = UnpackContext(tar_, dest_, {}, nullptr);
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), Code::kFileExists);
  EXPECT_EQ(ReadFile(dest_ + "/keep"), "mine");  // not removed on this error

  fs::remove_all(dest_);
  WriteFile(tar_, "this is not a tar at all, just some words long enough to be read");
  stats = UnpackContext(tar_, dest_, {}, nullptr);
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), Code::kInvalidArchive);
  EXPECT_FALSE(fs::exists(dest_));

  stats = UnpackContext(dir_ / "missing.tar", dest_, {}, nullptr);
  EXPECT_EQ(stats.status().code(), Code::kFileNotFound);
}

TEST_F(UnpackTest, DockerIgnoreSkipsButKeepsDockerfileAndItself) {
  Result<DockerIgnore> ignore =
      DockerIgnore::Parse("*.log\n!keep.log\nbuild\nDockerfile\n.dockerignore\n");
  ASSERT_TRUE(ignore.ok());
  Result<ContextStats> stats = Unpack({{"Dockerfile", 'f', "FROM x"},
                                       {".dockerignore", 'f', "*.log"},
                                       {"a.log", 'f', "no"},
                                       {"keep.log", 'f', "yes"},
                                       {"build", 'd', ""},
                                       {"build/out.o", 'f', "no"},
                                       {"src/main.c", 'f', "yes"}},
                                      {}, &*ignore);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_TRUE(fs::exists(dest_ + "/Dockerfile"));
  EXPECT_TRUE(fs::exists(dest_ + "/.dockerignore"));
  EXPECT_TRUE(fs::exists(dest_ + "/keep.log"));
  EXPECT_TRUE(fs::exists(dest_ + "/src/main.c"));
  EXPECT_FALSE(fs::exists(dest_ + "/a.log"));
  EXPECT_FALSE(fs::exists(dest_ + "/build"));
  EXPECT_EQ(stats->files, 4u);
}

}  // namespace
}  // namespace images_context_test
}  // namespace kiln::images
