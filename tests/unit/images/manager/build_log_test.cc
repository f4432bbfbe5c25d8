// An image build's log (src/images/manager/build_log.h): what one daemon
// writes, the next reads back the same, whatever bytes the build printed;
// the file stops at its cap with one line that says so.
#include "images/manager/build_log.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "unit/support/images_test_util.h"
#include "unit/support/temp_dir.h"

namespace kiln::images {
namespace images_build_log_test {
namespace {

using testutil::TempDir;

std::vector<LogLine> All(BuildLog& log) { return log.Read(0, 1000).lines; }

TEST(BuildLogTest, LinesReadBackTheSameAfterARestart) {
  TempDir dir;
  const std::string path = dir / "build.ndjson";
  {
    BuildLog log(path);
    log.Line("system", std::nullopt, "Step 1/2 : FROM base");
    log.Write("stdout", 2, "plain\nquote \" backslash \\ tab \t\n");
    log.Write("stderr", 2, "no newline yet");
    log.Write("stdout", 2, std::string("bad utf-8 \xff\xfe ok\r\n"));
    log.Close();  // flushes the partial stderr line
  }
  BuildLog again(path);
  std::vector<LogLine> lines = All(again);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0].stream, "system");
  EXPECT_FALSE(lines[0].step.has_value());
  EXPECT_EQ(lines[1].text, "plain");
  EXPECT_EQ(lines[2].text, "quote \" backslash \\ tab \t");
  EXPECT_EQ(lines[2].step, 2);
  EXPECT_EQ(lines[3].stream, "stdout");
  EXPECT_EQ(lines[3].text, "bad utf-8 \xEF\xBF\xBD\xEF\xBF\xBD ok");  // replaced, \r dropped
  EXPECT_EQ(lines[4].stream, "stderr");
  EXPECT_EQ(lines[4].text, "no newline yet");
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].n, static_cast<int64_t>(i + 1));
    EXPECT_GT(lines[i].time_ms, 0);
  }
  EXPECT_TRUE(again.Read(0, 1000).done);  // a log read back belongs to an ended build
}

TEST(BuildLogTest, TheFileStopsAtItsCapAndSaysSo) {
  TempDir dir;
  const std::string path = dir / "build.ndjson";
  const std::string chunk(BuildLog::kMaxLineBytes - 1, 'y');
  {
    BuildLog log(path);
    for (uint64_t written = 0; written < BuildLog::kMaxFileBytes + (1u << 20);
         written += chunk.size() + 1) {
      log.Write("stdout", 1, chunk + "\n");
    }
    log.Close();
  }
  uint64_t size = std::filesystem::file_size(path);
  EXPECT_LE(size, BuildLog::kMaxFileBytes);
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  EXPECT_NE(last.find("later lines are not kept"), std::string::npos) << last;
}

}  // namespace
}  // namespace images_build_log_test
}  // namespace kiln::images
