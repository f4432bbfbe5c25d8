// A one-line "creating sandbox… 2.3s" indicator for requests that take a
// while (create waiting for capacity, snapshot, fork). It goes to a
// terminal's stderr only, so pipes, logs and --json output stay clean.
#pragma once

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>

namespace kiln::cli {

// True when `fd` is a terminal and neither --json nor --quiet was given.
bool ProgressWanted(bool json, bool quiet, int fd);

// One frame: "\r<spinner> LABEL… 2.3s" plus erase-to-end-of-line.
std::string ProgressFrame(std::string_view label, std::chrono::milliseconds elapsed, int tick);

// While alive (and enabled), a thread redraws the line every 100 ms; the
// line is erased when Done() is called or the object is destroyed, also
// during unwinding, so an error message never lands behind a spinner.
class Progress {
 public:
  Progress(std::string label, bool enabled, int fd = STDERR_FILENO);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void Done();  // erase the line now; later calls do nothing

 private:
  void DrawLoop(std::stop_token stop);

  std::string label_;
  int fd_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool drawn_ = false;   // guarded by mu_
  std::jthread thread_;  // last: stopped and joined before the rest goes
};

}  // namespace kiln::cli
