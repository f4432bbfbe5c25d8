#include "api/console/console_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "unit/support/temp_dir.h"

namespace kiln::api {
namespace {

namespace fs = std::filesystem;

class ConsoleFilesTest : public ::testing::Test {
 protected:
  void Write(const std::string& name, const std::string& text) {
    fs::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name) << text;
  }
  testutil::TempDir tmp_{"kiln-console-test"};
  const fs::path dir_ = tmp_.path();
};

TEST_F(ConsoleFilesTest, ServesOnlyWhatItRead) {
  Write("index.html", "<!doctype html>");
  Write("app.js", "x()");
  Write("assets/font.woff2", "w");
  Write("assets/deeper/secret.txt", "no");  // two folders down: not read
  Write(".hidden", "no");
  fs::create_symlink("/etc/passwd", dir_ / "passwd.txt");
  auto files = ConsoleFiles::Load(dir_);
  ASSERT_TRUE(files.ok()) << files.status().message();
  EXPECT_EQ(files->size(), 3u);
  ASSERT_NE(files->Find("index.html"), nullptr);
  EXPECT_EQ(files->Find("index.html")->bytes, "<!doctype html>");
  EXPECT_EQ(files->Find("index.html")->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(files->Find("app.js")->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(files->Find("assets/font.woff2")->content_type, "font/woff2");
  EXPECT_EQ(files->Find("assets/deeper/secret.txt"), nullptr);
  EXPECT_EQ(files->Find(".hidden"), nullptr);
  EXPECT_EQ(files->Find("passwd.txt"), nullptr);
  EXPECT_EQ(files->Find("../index.html"), nullptr);
  EXPECT_EQ(files->Find("assets/../index.html"), nullptr);
  EXPECT_EQ(files->Find(""), nullptr);
}

TEST_F(ConsoleFilesTest, EtagsFollowTheContent) {
  Write("a.js", "one");
  Write("b.js", "two");
  auto files = ConsoleFiles::Load(dir_);
  ASSERT_TRUE(files.ok());
  std::string a = files->Find("a.js")->etag;
  EXPECT_EQ(a.size(), 18u);  // quoted 16 hex digits
  EXPECT_NE(a, files->Find("b.js")->etag);
}

TEST_F(ConsoleFilesTest, AGzipBesideAFileIsItsEncoding) {
  Write("app.js", "plain");
  Write("app.js.gz", "zipped");
  Write("orphan.js.gz", "alone");  // no plain file: served as itself
  auto files = ConsoleFiles::Load(dir_);
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 2u);
  const ConsoleFiles::File* f = files->Find("app.js");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->bytes, "plain");
  EXPECT_EQ(f->gzip, "zipped");
  EXPECT_NE(f->gzip_etag, f->etag);
  EXPECT_EQ(files->Find("app.js.gz"), nullptr);
  EXPECT_NE(files->Find("orphan.js.gz"), nullptr);
}

TEST_F(ConsoleFilesTest, AMissingFolderIsAnEmptyConsole) {
  auto files = ConsoleFiles::Load(dir_ / "absent");
  ASSERT_TRUE(files.ok());
  EXPECT_TRUE(files->empty());
}

TEST_F(ConsoleFilesTest, AFolderPastTheLimitsIsRefused) {
  Write("big.js", std::string(ConsoleFiles::kMaxFileBytes + 1, 'x'));
  auto files = ConsoleFiles::Load(dir_);
  ASSERT_FALSE(files.ok());
  EXPECT_NE(files.status().message().find("--console-dir"), std::string::npos);
}

TEST(ConsoleNamesTest, OnlyPlainNames) {
  EXPECT_TRUE(ConsoleFiles::ValidName("app.js"));
  EXPECT_TRUE(ConsoleFiles::ValidName("assets/x-1_2.woff2"));
  EXPECT_FALSE(ConsoleFiles::ValidName("a/b/c"));
  EXPECT_FALSE(ConsoleFiles::ValidName(".."));
  EXPECT_FALSE(ConsoleFiles::ValidName("a//b"));
  EXPECT_FALSE(ConsoleFiles::ValidName("/etc"));
  EXPECT_FALSE(ConsoleFiles::ValidName("a%2e"));
  EXPECT_FALSE(ConsoleFiles::ValidName(std::string("a\0b", 3)));
}

}  // namespace
}  // namespace kiln::api
