// The stderr of every sandbox (runsc's own words while it starts, then the
// agent's), kept in a capped file.
//
// A sandbox's stderr is a FIFO (sandboxes/<id>/agent.err), not a file: root
// inside can write to PID 1's stderr (/proc/1/fd/2) as fast as it likes, and
// a host file would take the host's disk with it. One thread reads every
// sandbox's FIFO (epoll) into sandboxes/<id>/sandbox.log until that file
// holds kMaxBytes, then counts and drops the rest (one line says so). A
// FIFO past its cap is no longer watched but emptied once a second, so a
// flood costs kilnd at most kSweepBytes a second of reading and its writer
// waits on a full FIFO the rest of the time. A stopped kilnd reads nothing;
// the sandbox's writes then wait once the FIFO's buffer is full, and a
// restarted kilnd adds the FIFO again.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "common/unique_fd.h"

namespace kiln::engine {

class StderrDrain {
 public:
  static constexpr uint64_t kMaxBytes = 1u << 20;
  static constexpr uint64_t kSweepBytes = 1u << 20;  // per capped FIFO, per second

  StderrDrain();
  ~StderrDrain();  // stops the thread; leaves the files
  StderrDrain(const StderrDrain&) = delete;
  StderrDrain& operator=(const StderrDrain&) = delete;

  // Starts reading `fifo` (opened by the caller, non-blocking) into `log`.
  // Replaces an earlier registration of `id`.
  void Add(const std::string& id, UniqueFd fifo, const std::string& log);
  // Reads what is in the FIFO now into the log, on the caller's thread: the
  // words of a runsc that just failed, before the caller reads the log.
  void Flush(const std::string& id);
  // Stops reading it (the sandbox is gone); closes the FIFO.
  void Remove(const std::string& id);

 private:
  struct Source {
    std::string id;
    UniqueFd fifo;
    UniqueFd log;
    uint64_t written = 0, dropped = 0;
    bool capped = false;  // past kMaxBytes: swept, not watched
  };
  void Loop();
  // Reads what is there now, at most `budget` bytes; false once the FIFO
  // has no writer left.
  bool Pump(Source& s, uint64_t budget);

  std::mutex mu_;
  std::map<int, Source> sources_;  // by FIFO fd
  UniqueFd epoll_;
  UniqueFd wake_r_, wake_w_;
  std::thread thread_;
};

}  // namespace kiln::engine
