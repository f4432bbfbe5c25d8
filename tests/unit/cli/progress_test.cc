// kiln CLI: the progress line for long operations — its frames, and that it
// shows on a terminal only.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include "cli/progress.h"

namespace kiln::cli {
namespace cli_progress_test {
namespace {

using namespace std::chrono_literals;

// A pseudo-terminal: `slave` is what a program sees as its terminal.
class Pty {
 public:
  Pty() {
    master_ = ::posix_openpt(O_RDWR | O_NOCTTY);
    if (master_ < 0 || ::grantpt(master_) != 0 || ::unlockpt(master_) != 0) return;
    slave_ = ::open(::ptsname(master_), O_RDWR | O_NOCTTY);
    ::fcntl(master_, F_SETFL, O_NONBLOCK);
  }
  ~Pty() {
    if (slave_ >= 0) ::close(slave_);
    if (master_ >= 0) ::close(master_);
  }
  bool ok() const { return slave_ >= 0; }
  int slave() const { return slave_; }
  std::string ReadAll() {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(master_, buf, sizeof buf)) > 0;) {
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }

 private:
  int master_ = -1, slave_ = -1;
};

class Pipe {
 public:
  Pipe() { EXPECT_EQ(::pipe2(fds_, O_NONBLOCK), 0); }
  ~Pipe() {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  int write_end() const { return fds_[1]; }
  std::string ReadAll() {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds_[0], buf, sizeof buf)) > 0;) {
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }

 private:
  int fds_[2] = {-1, -1};
};

TEST(CliProgress, Frames) {
  EXPECT_EQ(ProgressFrame("creating sandbox", 2300ms, 0),
            "\r| creating sandbox\xe2\x80\xa6 2.3s\x1b[K");
  EXPECT_EQ(ProgressFrame("forking sandbox s", 0ms, 1),
            "\r/ forking sandbox s\xe2\x80\xa6 0.0s\x1b[K");
  EXPECT_EQ(ProgressFrame("x", 61050ms, 6), "\r- x\xe2\x80\xa6 61.0s\x1b[K");
}

TEST(CliProgress, WantedOnATerminalOnly) {
  Pipe pipe;
  EXPECT_FALSE(ProgressWanted(false, false, pipe.write_end()));
  int null_fd = ::open("/dev/null", O_WRONLY);
  EXPECT_FALSE(ProgressWanted(false, false, null_fd));
  ::close(null_fd);

  Pty pty;
  if (!pty.ok()) GTEST_SKIP() << "no pseudo-terminals here";
  EXPECT_TRUE(ProgressWanted(false, false, pty.slave()));
  EXPECT_FALSE(ProgressWanted(true, false, pty.slave()));  // --json
  EXPECT_FALSE(ProgressWanted(false, true, pty.slave()));  // --quiet
}

TEST(CliProgress, DrawsWhileRunningAndErasesWhenDone) {
  Pipe pipe;
  {
    Progress progress("creating sandbox", /*enabled=*/true, pipe.write_end());
    std::this_thread::sleep_for(600ms);
    progress.Done();
    const std::string out = pipe.ReadAll();
    EXPECT_TRUE(out.starts_with("\r| creating sandbox\xe2\x80\xa6 0.")) << out;
    EXPECT_NE(out.find("\r/ creating sandbox"), std::string::npos) << out;
    EXPECT_TRUE(out.ends_with("\x1b[K\r\x1b[K")) << out;  // the last frame, then erased
    progress.Done();                                      // a second Done() writes nothing
  }
  EXPECT_EQ(pipe.ReadAll(), "");
}

TEST(CliProgress, SilentWhenDisabledOrQuick) {
  Pipe pipe;
  {
    Progress progress("creating sandbox", /*enabled=*/false, pipe.write_end());
    std::this_thread::sleep_for(300ms);
  }
  EXPECT_EQ(pipe.ReadAll(), "");
  {
    // Done before the first frame: no flicker, not even an erase.
    Progress progress("creating sandbox", /*enabled=*/true, pipe.write_end());
  }
  EXPECT_EQ(pipe.ReadAll(), "");
}

TEST(CliProgress, ErasedWhenAnExceptionUnwinds) {
  Pipe pipe;
  try {
    Progress progress("snapshotting sandbox", /*enabled=*/true, pipe.write_end());
    std::this_thread::sleep_for(250ms);
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  const std::string out = pipe.ReadAll();
  EXPECT_NE(out.find("snapshotting sandbox"), std::string::npos);
  EXPECT_TRUE(out.ends_with("\r\x1b[K")) << out;
}

}  // namespace
}  // namespace cli_progress_test
}  // namespace kiln::cli
