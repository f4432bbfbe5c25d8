#include "cli/progress.h"

#include <array>
#include <cstdio>

#include "cli/output.h"

namespace kiln::cli {
namespace {

using namespace std::chrono_literals;

// Short operations finish before the first frame, so they never flicker.
constexpr auto kFirstFrame = 150ms;
constexpr auto kFrameInterval = 100ms;
constexpr std::array<std::string_view, 4> kSpinner = {"|", "/", "-", "\\"};
constexpr std::string_view kEraseLine = "\r\x1b[K";

}  // namespace

bool ProgressWanted(bool json, bool quiet, int fd) { return !json && !quiet && ::isatty(fd) == 1; }

std::string ProgressFrame(std::string_view label, std::chrono::milliseconds elapsed, int tick) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1fs", static_cast<double>(elapsed.count()) / 1000.0);
  return "\r" + std::string(kSpinner[static_cast<std::size_t>(tick) % kSpinner.size()]) + " " +
         std::string(label) + "\xe2\x80\xa6 " + seconds + "\x1b[K";
}

Progress::Progress(std::string label, bool enabled, int fd)
    : label_(std::move(label)), fd_(fd), start_(std::chrono::steady_clock::now()) {
  if (enabled) thread_ = std::jthread([this](std::stop_token stop) { DrawLoop(stop); });
}

Progress::~Progress() { Done(); }

void Progress::Done() {
  // request_stop wakes the wait in DrawLoop.
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  if (drawn_) WriteAll(fd_, kEraseLine);
  drawn_ = false;
}

void Progress::DrawLoop(std::stop_token stop) {
  std::unique_lock lock(mu_);
  auto next = start_ + kFirstFrame;
  for (int tick = 0;; ++tick) {
    // Only a stop request (Done()) ends the wait before the next frame.
    if (cv_.wait_until(lock, stop, next, [&stop] { return stop.stop_requested(); })) return;
    const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start_);
    WriteAll(fd_, ProgressFrame(label_, elapsed, tick));
    drawn_ = true;
    next += kFrameInterval;
  }
}

}  // namespace kiln::cli
