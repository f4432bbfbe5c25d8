// A program started by the agent, with its stdio pipes, its exit and the
// killing of whatever it left behind.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "agent/event_loop.h"
#include "agent/spawn.h"
#include "common/unique_fd.h"

namespace kiln::agent {

class CommandRegistry;

struct CommandResult {
  bool exited = false;  // exited by itself (exit_code valid)
  int exit_code = 0;
  int signal = 0;  // the signal that ended it, when !exited
  bool timed_out = false;
  int64_t duration_ms = 0;
};

// A terminal's window in character cells.
struct WindowSize {
  int cols = 80;
  int rows = 24;
};

class Command {
 public:
  struct Options {
    bool stdin_pipe = false;      // keep a pipe to its stdin (else stdin data or /dev/null)
    bool cleanup_on_exit = true;  // kill everything it started when it returns
    // Run it on a pseudo-terminal of this size instead of pipes: the slave
    // is its stdin, stdout and stderr and its controlling terminal; the
    // master's output arrives as channel 1, stdin writes go to the master
    // (stdin_pipe is implied).
    std::optional<WindowSize> pty;
  };
  struct Callbacks {
    std::function<void(uint8_t channel, std::string_view data)> on_output;
    std::function<void(const CommandResult&)> on_done;  // exit seen and output drained
  };

  // Starts the program. On failure returns null and sets *error.
  static std::unique_ptr<Command> Start(EventLoop& loop, CommandRegistry& registry, SpawnSpec spec,
                                        const std::string& token, Options options,
                                        Callbacks callbacks, SpawnResult* error);
  ~Command();
  Command(const Command&) = delete;
  Command& operator=(const Command&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& token() const { return token_; }
  bool running() const { return !exit_seen_; }

  // Stdin: queued and written as the pipe drains. Returns bytes accepted.
  size_t WriteStdin(std::string_view data);
  void CloseStdin();
  bool stdin_open() const { return stdin_.valid() && !stdin_closing_; }
  uint64_t stdin_offset() const { return stdin_accepted_; }

  // Flow control: stop reading output until resumed (the program blocks).
  void PauseOutput(bool paused);

  // Whether it runs on a terminal, and that terminal's size now.
  bool has_pty() const { return pty_.valid(); }
  const WindowSize& window() const { return window_; }
  // TIOCSWINSZ on the master: the kernel sends the foreground process group
  // SIGWINCH. False once it ended (the master is closed) or on failure.
  bool Resize(WindowSize size);

  void Signal(int sig);          // to its process group
  void KillAll(bool timed_out);  // it and everything it started

  // Called by the registry when waitpid() reports it.
  void OnExit(int status);

 private:
  Command(EventLoop& loop, CommandRegistry& registry);
  void WatchOutput(int index);
  // EPOLLIN for an output pipe unless paused (flow control) or lingering.
  void ArmOutput(int index);
  void OnOutputReadable(int index);
  void CloseOutput(int index);
  // The drain's end: what the pipes already hold is sent, then they close.
  void EndDrain();
  void OnStdinWritable();
  void MaybeFinish();
  void StartCleanup();

  EventLoop& loop_;
  CommandRegistry& registry_;
  Callbacks callbacks_;
  Options options_;
  std::string token_;
  pid_t pid_ = -1;
  int64_t started_ms_ = 0;
  UniqueFd out_[2];  // stdout, stderr read ends
  bool paused_ = false;
  // Streaming output in small writes wakes the agent for each one, and a
  // wake-up is dear in gVisor. Once a command has written kCoalesceAfter
  // bytes, a short read makes the agent leave that pipe alone for
  // kLingerMs, so the next read takes what piled up meanwhile.
  uint64_t output_bytes_ = 0;
  bool lingering_[2] = {false, false};
  EventLoop::TimerId linger_timer_[2] = {0, 0};
  // The terminal's master when it runs on one (for resizes; out_[0] and
  // stdin_ are duplicates of it, so each can be closed on its own terms).
  UniqueFd pty_;
  WindowSize window_;
  UniqueFd stdin_;
  std::string stdin_buf_;
  bool stdin_closing_ = false;
  uint64_t stdin_accepted_ = 0;
  bool exit_seen_ = false;
  bool cleaning_ = false;  // a cleanup job runs for it
  bool cleaned_ = false;   // ...and has finished
  bool done_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  CommandResult result_;
  EventLoop::TimerId drain_timer_ = 0;
};

// Maps pids to commands so SIGCHLD reaches the right one; knows the live
// sessions so one command's cleanup never touches another's processes.
class CommandRegistry {
 public:
  explicit CommandRegistry(EventLoop& loop) : loop_(loop) {}

  // `on_exit` gets the wait status of `pid` when it is reaped.
  void Add(pid_t pid, std::function<void(int status)> on_exit) {
    by_pid_[pid] = std::move(on_exit);
  }
  void Remove(pid_t pid) { by_pid_.erase(pid); }
  std::set<pid_t> SessionsExcept(pid_t sid) const;
  // Reaps every exited child (the agent is PID 1: orphans land here too).
  void ReapAll();

  // Kills everything of session `sid` / owner `token`, one /proc pass per
  // tick so the agent keeps serving meanwhile, until a pass finds nothing
  // (or 10 s pass); then calls `done` (if set).
  void Cleanup(pid_t sid, const std::string& token, std::function<void()> done);

 private:
  void CleanupPass(uint64_t job);

  struct CleanupJob {
    pid_t sid;
    std::string token;
    int64_t deadline_ms;
    std::function<void()> done;
  };
  EventLoop& loop_;
  std::map<pid_t, std::function<void(int)>> by_pid_;
  std::map<uint64_t, CleanupJob> jobs_;
  uint64_t next_job_ = 1;
};

}  // namespace kiln::agent
