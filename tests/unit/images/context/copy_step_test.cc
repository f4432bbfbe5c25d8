// COPY and ADD into a layer directory: Docker's destination rules, globs,
// symlinks copied (never followed), ADD archives, chown/chmod, and the
// sources' digest used as the cache key.
#include "images/context/copy_step.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit/support/images_test_util.h"
#include "unit/support/temp_dir.h"

namespace kiln::images {
namespace images_copy_step_test {
namespace {

using testing::ModeOf;
using testing::ReadFile;
using testing::TarEntry;
using testing::WriteFile;
using testing::WriteTar;
using testutil::TempDir;
namespace fs = std::filesystem;

class CopyStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_ = dir_ / "ctx";
    parent_ = dir_ / "parent";
    layer_ = dir_ / "layer";
    WriteFile(ctx_ + "/a.txt", "alpha\n");
    WriteFile(ctx_ + "/b.txt", "beta\n", 0600);
    WriteFile(ctx_ + "/run.sh", "#!/bin/sh\n", 0755);
    WriteFile(ctx_ + "/src/main.c", "int main;\n");
    WriteFile(ctx_ + "/src/lib/util.c", "int util;\n");
    WriteFile(ctx_ + "/src/debug.log", "noise\n");
    fs::create_symlink("/etc/passwd", ctx_ + "/src/passwd-link");
    fs::create_symlink("/", ctx_ + "/escape");
    fs::create_directories(parent_ + "/existing");
    ::chmod((parent_ + "/existing").c_str(), 0750);
    fs::create_directories(parent_ + "/usr/bin");
    fs::create_symlink("usr/bin", parent_ + "/bin");
    WriteFile(parent_ + "/etc/file", "x");
  }

  CopySpec Spec(std::vector<std::string> sources, std::string dest) {
    CopySpec spec;
    spec.source_root = ctx_;
    spec.sources = std::move(sources);
    spec.dest = std::move(dest);
    return spec;
  }

  Result<CopyStats> Copy(const CopySpec& spec) { return ApplyCopy(spec, parent_, layer_); }

  TempDir dir_;
  std::string ctx_, parent_, layer_;
};

TEST_F(CopyStepTest, FileToFileAndParentsCreated) {
  Result<CopyStats> stats = Copy(Spec({"a.txt"}, "/app/config/x.txt"));
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->files, 1u);
  EXPECT_EQ(stats->bytes, 6u);
  EXPECT_EQ(ReadFile(layer_ + "/app/config/x.txt"), "alpha\n");
  EXPECT_EQ(ModeOf(layer_ + "/app"), 0755u);
  EXPECT_EQ(ModeOf(layer_ + "/app/config/x.txt"), 0644u);
}

TEST_F(CopyStepTest, DestinationDirectoryRules) {
  // A trailing "/".
  ASSERT_TRUE(Copy(Spec({"a.txt"}, "/app/")).ok());
  EXPECT_EQ(ReadFile(layer_ + "/app/a.txt"), "alpha\n");
  // A directory in the parent image: recreated with its mode there.
  ASSERT_TRUE(Copy(Spec({"b.txt"}, "/existing")).ok());
  EXPECT_EQ(ReadFile(layer_ + "/existing/b.txt"), "beta\n");
  EXPECT_EQ(ModeOf(layer_ + "/existing"), 0750u);
  EXPECT_EQ(ModeOf(layer_ + "/existing/b.txt"), 0600u);  // the file keeps its mode
  // Several sources.
  ASSERT_TRUE(Copy(Spec({"a.txt", "b.txt"}, "/multi")).ok());
  EXPECT_TRUE(fs::is_regular_file(layer_ + "/multi/a.txt"));
  EXPECT_TRUE(fs::is_regular_file(layer_ + "/multi/b.txt"));
  // None of these: the name is the file's.
  ASSERT_TRUE(Copy(Spec({"a.txt"}, "/etc/file")).ok());
  EXPECT_EQ(ReadFile(layer_ + "/etc/file"), "alpha\n");
  // A directory source copies its contents, not itself.
  ASSERT_TRUE(Copy(Spec({"src"}, "/code")).ok());
  EXPECT_EQ(ReadFile(layer_ + "/code/main.c"), "int main;\n");
  EXPECT_EQ(ReadFile(layer_ + "/code/lib/util.c"), "int util;\n");
  EXPECT_FALSE(fs::exists(layer_ + "/code/src"));
  // A destination through the image's symlink lands where the link points.
  ASSERT_TRUE(Copy(Spec({"run.sh"}, "/bin/")).ok());
  EXPECT_EQ(ReadFile(layer_ + "/usr/bin/run.sh"), "#!/bin/sh\n");
  EXPECT_FALSE(fs::exists(fs::symlink_status(layer_ + "/bin")));
  // The whole context.
  ASSERT_TRUE(Copy(Spec({"."}, "/all")).ok());
  EXPECT_TRUE(fs::is_regular_file(layer_ + "/all/src/main.c"));
}

TEST_F(CopyStepTest, Globs) {
  Result<CopyStats> stats = Copy(Spec({"*.txt"}, "/g"));  // two matches: /g is a directory
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->files, 2u);
  EXPECT_EQ(ReadFile(layer_ + "/g/a.txt"), "alpha\n");
  EXPECT_EQ(ReadFile(layer_ + "/g/b.txt"), "beta\n");
  EXPECT_FALSE(fs::exists(layer_ + "/g/run.sh"));
  ASSERT_TRUE(Copy(Spec({"s?c/*/[t-v]til.c"}, "/one.c")).ok());  // one match: a file
  EXPECT_EQ(ReadFile(layer_ + "/one.c"), "int util;\n");

  Result<CopyStats> none = Copy(Spec({"*.none"}, "/x/"));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kFileNotFound);
  EXPECT_EQ(none.status().details()["source"], "*.none");
  EXPECT_NE(none.status().message().find("*.none"), std::string::npos);
}

TEST_F(CopyStepTest, SourcesMustExistAndStayInside) {
  Result<CopyStats> r = Copy(Spec({"a.txt", "missing.txt"}, "/d/"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFileNotFound);
  EXPECT_EQ(r.status().details()["source"], "missing.txt");
  for (const char* bad : {"../x", "src/../../x", "/../etc/passwd"}) {
    r = Copy(Spec({bad}, "/d/"));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidRequest) << bad;
    EXPECT_EQ(r.status().details()["source"], bad);
  }
  // "escape" -> "/": resolved inside the context, which has no etc/passwd.
  r = Copy(Spec({"escape/etc/passwd"}, "/p"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFileNotFound);
  EXPECT_FALSE(fs::exists(layer_ + "/p"));
  EXPECT_EQ(Copy(Spec({"a.txt"}, "relative")).status().code(), Code::kInvalidRequest);
}

TEST_F(CopyStepTest, SymlinksAreCopiedNotFollowed) {
  ASSERT_TRUE(Copy(Spec({"src/passwd-link"}, "/l")).ok());
  EXPECT_TRUE(fs::is_symlink(layer_ + "/l"));
  EXPECT_EQ(fs::read_symlink(layer_ + "/l"), "/etc/passwd");
  ASSERT_TRUE(Copy(Spec({"escape"}, "/e")).ok());
  EXPECT_EQ(fs::read_symlink(layer_ + "/e"), "/");
  ASSERT_TRUE(Copy(Spec({"src"}, "/code/")).ok());
  EXPECT_TRUE(fs::is_symlink(layer_ + "/code/passwd-link"));
}

TEST_F(CopyStepTest, ChownAndChmod) {
  CopySpec spec = Spec({"src"}, "/owned/deep");
  spec.chown = std::make_pair(1000u, 1001u);
  spec.chmod = 0640;
  ASSERT_TRUE(Copy(spec).ok());
  EXPECT_EQ(ModeOf(layer_ + "/owned/deep/main.c"), 0640u);
  EXPECT_EQ(ModeOf(layer_ + "/owned/deep/lib"), 0640u);  // copied directories too
  EXPECT_EQ(ModeOf(layer_ + "/owned"), 0755u);           // created parents are not chmod'ed
  ASSERT_TRUE(Copy(Spec({"run.sh"}, "/plain/")).ok());
  if (::geteuid() != 0) GTEST_SKIP() << "ownership needs root";
  struct stat st;
  ASSERT_EQ(::lstat((layer_ + "/owned/deep/main.c").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_gid, 1001u);
  ASSERT_EQ(::lstat((layer_ + "/owned").c_str(), &st), 0);  // a dir COPY created
  EXPECT_EQ(st.st_uid, 1000u);
  ASSERT_EQ(::lstat((layer_ + "/owned/deep/passwd-link").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
  ASSERT_EQ(::lstat((layer_ + "/plain/run.sh").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, 0u);
}

TEST_F(CopyStepTest, AddExtractsArchivesCopyDoesNot) {
  WriteTar(ctx_ + "/bundle.tar.gz", {{"top", 'd', "", 0755},
                                     {"top/f.txt", 'f', "in the tar\n", 0600, 33, 33},
                                     {"/abs.txt", 'f', "stripped\n"},
                                     {"dev", 'c', ""}});
  WriteTar(ctx_ + "/plain.tar", {{"p.txt", 'f', "plain\n"}}, /*gzip=*/false);
  CopySpec add = Spec({"bundle.tar.gz", "plain.tar"}, "/opt/");
  add.add = true;
  Result<CopyStats> stats = Copy(add);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(ReadFile(layer_ + "/opt/top/f.txt"), "in the tar\n");
  EXPECT_EQ(ModeOf(layer_ + "/opt/top/f.txt"), 0600u);
  EXPECT_EQ(ReadFile(layer_ + "/opt/abs.txt"), "stripped\n");
  EXPECT_EQ(ReadFile(layer_ + "/opt/p.txt"), "plain\n");
  EXPECT_FALSE(fs::exists(layer_ + "/opt/dev"));
  EXPECT_FALSE(fs::exists(layer_ + "/opt/bundle.tar.gz"));
  if (::geteuid() == 0) {
    struct stat st;
    ASSERT_EQ(::lstat((layer_ + "/opt/top/f.txt").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 33u);  // ADD keeps the archive's owners without --chown
  }
  // ADD of a file that is not an archive copies it.
  CopySpec add_text = Spec({"a.txt"}, "/t/");
  add_text.add = true;
  ASSERT_TRUE(Copy(add_text).ok());
  EXPECT_EQ(ReadFile(layer_ + "/t/a.txt"), "alpha\n");
  // COPY never extracts.
  ASSERT_TRUE(Copy(Spec({"bundle.tar.gz"}, "/c/")).ok());
  EXPECT_TRUE(fs::is_regular_file(layer_ + "/c/bundle.tar.gz"));
  // An archive that tries to climb out is refused.
  WriteTar(ctx_ + "/evil.tar", {{"../../escaped", 'f', "x"}});
  CopySpec evil = Spec({"evil.tar"}, "/e/");
  evil.add = true;
  Result<CopyStats> r = Copy(evil);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArchive);
  EXPECT_FALSE(fs::exists(dir_ / "escaped"));
}

TEST_F(CopyStepTest, DigestFollowsContentNotIgnoredFiles) {
  Result<DockerIgnore> ignore = DockerIgnore::Parse("**/*.log");
  ASSERT_TRUE(ignore.ok());
  CopySpec spec = Spec({"."}, "/app/");
  spec.ignore = &*ignore;
  Result<std::string> d0 = CopySourcesDigest(spec);
  ASSERT_TRUE(d0.ok()) << d0.status().ToString();
  EXPECT_EQ(d0->size(), 64u);
  EXPECT_EQ(*CopySourcesDigest(spec), *d0);  // stable

  WriteFile(ctx_ + "/src/debug.log", "other noise\n");  // ignored
  EXPECT_EQ(*CopySourcesDigest(spec), *d0);
  struct timespec t[2] = {{1, 0}, {1, 0}};
  ::utimensat(AT_FDCWD, (ctx_ + "/a.txt").c_str(), t, 0);  // times are not content
  EXPECT_EQ(*CopySourcesDigest(spec), *d0);

  WriteFile(ctx_ + "/src/main.c", "int Main;\n");  // one byte
  Result<std::string> d1 = CopySourcesDigest(spec);
  EXPECT_NE(*d1, *d0);
  ::chmod((ctx_ + "/src/main.c").c_str(), 0600);  // a mode
  Result<std::string> d2 = CopySourcesDigest(spec);
  EXPECT_NE(*d2, *d1);
  fs::remove(ctx_ + "/src/passwd-link");
  fs::create_symlink("/etc/shadow", ctx_ + "/src/passwd-link");  // a link target
  EXPECT_NE(*CopySourcesDigest(spec), *d2);

  // The ignored file is not copied either.
  ASSERT_TRUE(Copy(spec).ok());
  EXPECT_TRUE(fs::exists(layer_ + "/app/src/main.c"));
  EXPECT_FALSE(fs::exists(layer_ + "/app/src/debug.log"));

  // Errors match ApplyCopy's.
  EXPECT_EQ(CopySourcesDigest(Spec({"nope"}, "/")).status().code(), Code::kFileNotFound);
  EXPECT_EQ(CopySourcesDigest(Spec({"../x"}, "/")).status().code(), Code::kInvalidRequest);
  CopySpec excluded = Spec({"src/debug.log"}, "/");
  excluded.ignore = &*ignore;
  EXPECT_EQ(CopySourcesDigest(excluded).status().code(), Code::kFileNotFound);
  // Which file a glob picked is part of it.
  EXPECT_NE(*CopySourcesDigest(Spec({"a.txt"}, "/")), *CopySourcesDigest(Spec({"b.txt"}, "/")));
}

}  // namespace
}  // namespace images_copy_step_test
}  // namespace kiln::images
