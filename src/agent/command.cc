#include "agent/command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "agent/proc_scan.h"

namespace kiln::agent {
namespace {

// After a command returns and its leftovers are killed, how long its
// output pipes may stay open (held by an escaped process) before we stop
// waiting for EOF.
constexpr int64_t kDrainMs = 2000;

// Output coalescing (see Command::lingering_): small outputs -- almost every
// command's -- are read and sent as they come.
constexpr uint64_t kCoalesceAfter = 256 * 1024;
constexpr int64_t kLingerMs = 1;
constexpr size_t kReadChunk = 64 * 1024;

bool MakePipe(UniqueFd& read_end, UniqueFd& write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) < 0) return false;
  read_end.reset(fds[0]);
  write_end.reset(fds[1]);
  // Room for what piles up while the agent lingers (gVisor's limit).
  fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);
  return true;
}

// A pseudo-terminal pair of the given size; the slave is handed to `uid`
// (mode 620, as a login's terminal is) so the program may reopen it by name.
bool MakePty(const WindowSize& size, uid_t uid, gid_t gid, UniqueFd& master, UniqueFd& slave) {
  master.reset(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  // An image's /dev may lack the ptmx link; devpts has its own.
  if (!master) master.reset(::open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master || grantpt(master.get()) < 0 || unlockpt(master.get()) < 0) return false;
  char name[128];
  if (ptsname_r(master.get(), name, sizeof name) != 0) return false;
  slave.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!slave) return false;
  if (fchown(slave.get(), uid, gid) < 0 || fchmod(slave.get(), 0620) < 0) {
    // Not fatal: the program still has it open as fds 0-2.
  }
  winsize ws{};
  ws.ws_col = static_cast<unsigned short>(size.cols);
  ws.ws_row = static_cast<unsigned short>(size.rows);
  return ioctl(master.get(), TIOCSWINSZ, &ws) == 0;
}

}  // namespace

Command::Command(EventLoop& loop, CommandRegistry& registry) : loop_(loop), registry_(registry) {}

Command::~Command() {
  *alive_ = false;
  if (drain_timer_) loop_.CancelTimer(drain_timer_);
  for (int i = 0; i < 2; ++i) CloseOutput(i);
  if (stdin_) loop_.Remove(stdin_.get());
  if (!exit_seen_ && pid_ > 0) {
    // Destroyed while running (cancelled): take everything down with it.
    registry_.Remove(pid_);
    registry_.Cleanup(pid_, token_, nullptr);
  }
}

std::unique_ptr<Command> Command::Start(EventLoop& loop, CommandRegistry& registry, SpawnSpec spec,
                                        const std::string& token, Options options,
                                        Callbacks callbacks, SpawnResult* error) {
  std::unique_ptr<Command> c(new Command(loop, registry));
  c->callbacks_ = std::move(callbacks);
  c->options_ = options;
  c->token_ = token;
  UniqueFd in_r, in_w, out_w[2], slave;
  if (options.pty) {
    c->window_ = *options.pty;
    if (!MakePty(c->window_, spec.uid, spec.gid, c->pty_, slave)) {
      error->error = errno;
      error->what = "openpty";
      return nullptr;
    }
    // One description, three descriptors: reading, writing and resizing
    // each end on their own schedule (the output drains after the exit).
    c->out_[0].reset(fcntl(c->pty_.get(), F_DUPFD_CLOEXEC, 0));
    in_w.reset(fcntl(c->pty_.get(), F_DUPFD_CLOEXEC, 0));
    if (!c->out_[0] || !in_w) {
      error->error = errno;
      error->what = "dup";
      return nullptr;
    }
    spec.stdin_fd = spec.stdout_fd = spec.stderr_fd = slave.get();
    spec.controlling_tty = true;
    options.stdin_pipe = true;
  } else {
    if (!MakePipe(c->out_[0], out_w[0]) || !MakePipe(c->out_[1], out_w[1]) ||
        !MakePipe(in_r, in_w)) {
      error->error = errno;
      error->what = "pipe";
      return nullptr;
    }
    spec.stdin_fd = in_r.get();
    spec.stdout_fd = out_w[0].get();
    spec.stderr_fd = out_w[1].get();
  }
  spec.env.push_back(std::string(kOwnerEnv) + "=" + token);
  c->started_ms_ = MonotonicMs();
  SpawnResult r = Spawn(spec);
  if (r.pid < 0 || r.error != 0) {
    if (r.pid > 0) {
      // The child exited with 127 before exec; reap it via SIGCHLD later.
    }
    *error = r;
    return nullptr;
  }
  c->pid_ = r.pid;
  registry.Add(c->pid_, [raw = c.get()](int status) { raw->OnExit(status); });
  c->stdin_ = std::move(in_w);
  fcntl(c->stdin_.get(), F_SETFL, O_NONBLOCK);
  for (int i = 0; i < 2; ++i) {
    if (!c->out_[i]) continue;  // a terminal has one output
    fcntl(c->out_[i].get(), F_SETFL, O_NONBLOCK);
    c->WatchOutput(i);
  }
  c->options_.stdin_pipe = options.stdin_pipe;
  if (!options.stdin_pipe) c->CloseStdin();
  return c;
}

void Command::WatchOutput(int index) {
  loop_.Add(out_[index].get(), paused_ ? 0u : static_cast<uint32_t>(EPOLLIN),
            [this, index](uint32_t) { OnOutputReadable(index); });
}

void Command::ArmOutput(int index) {
  if (out_[index])
    loop_.Modify(out_[index].get(),
                 paused_ || lingering_[index] ? 0u : static_cast<uint32_t>(EPOLLIN));
}

void Command::OnOutputReadable(int index) {
  char buf[kReadChunk];
  size_t got = 0;
  for (int rounds = 0; rounds < 16 && out_[index] && !paused_; ++rounds) {
    ssize_t n = ::read(out_[index].get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    // A terminal's master reads EIO once no one holds the slave: its EOF.
    if (n <= 0) {
      CloseOutput(index);
      MaybeFinish();
      return;
    }
    got += static_cast<size_t>(n);
    output_bytes_ += static_cast<uint64_t>(n);
    if (callbacks_.on_output)
      callbacks_.on_output(static_cast<uint8_t>(index + 1),
                           std::string_view(buf, static_cast<size_t>(n)));
    if (static_cast<size_t>(n) < sizeof buf) break;
  }
  if (got >= kReadChunk || output_bytes_ < kCoalesceAfter || !out_[index]) return;
  lingering_[index] = true;
  ArmOutput(index);
  linger_timer_[index] = loop_.AddTimer(kLingerMs, [this, index, alive = alive_] {
    if (!*alive) return;
    linger_timer_[index] = 0;
    lingering_[index] = false;
    ArmOutput(index);
  });
}

void Command::CloseOutput(int index) {
  if (linger_timer_[index]) loop_.CancelTimer(linger_timer_[index]);
  linger_timer_[index] = 0;
  if (!out_[index]) return;
  loop_.Remove(out_[index].get());
  out_[index].reset();
}

bool Command::Resize(WindowSize size) {
  if (!pty_) return false;
  winsize ws{};
  ws.ws_col = static_cast<unsigned short>(size.cols);
  ws.ws_row = static_cast<unsigned short>(size.rows);
  if (ioctl(pty_.get(), TIOCSWINSZ, &ws) < 0) return false;
  window_ = size;
  return true;
}

void Command::PauseOutput(bool paused) {
  if (paused == paused_) return;
  paused_ = paused;
  for (int i = 0; i < 2; ++i) ArmOutput(i);
}

size_t Command::WriteStdin(std::string_view data) {
  if (!stdin_ || stdin_closing_) return 0;
  stdin_buf_.append(data);
  stdin_accepted_ += data.size();
  OnStdinWritable();
  return data.size();
}

void Command::CloseStdin() {
  if (!stdin_) return;
  stdin_closing_ = true;
  OnStdinWritable();
}

void Command::OnStdinWritable() {
  while (!stdin_buf_.empty() && stdin_) {
    ssize_t n = ::write(stdin_.get(), stdin_buf_.data(), stdin_buf_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) {  // EPIPE: the program closed its stdin; drop the rest
      stdin_buf_.clear();
      break;
    }
    stdin_buf_.erase(0, static_cast<size_t>(n));
  }
  bool pending = !stdin_buf_.empty();
  if (!pending && stdin_closing_) {
    loop_.Remove(stdin_.get());
    stdin_.reset();
    return;
  }
  if (pending) {
    loop_.Remove(stdin_.get());
    loop_.Add(stdin_.get(), EPOLLOUT, [this](uint32_t) { OnStdinWritable(); });
  }
}

void Command::Signal(int sig) {
  if (exit_seen_) return;
  // The program leads its own process group, so this also reaches a shell's
  // children, as a terminal's Ctrl-C does.
  if (::kill(-pid_, sig) < 0) ::kill(pid_, sig);
}

void Command::KillAll(bool timed_out) {
  if (timed_out) result_.timed_out = true;
  if (!exit_seen_) ::kill(pid_, SIGKILL);
  StartCleanup();
}

void Command::StartCleanup() {
  if (cleaning_ || pid_ <= 0) return;
  cleaning_ = true;
  registry_.Cleanup(pid_, token_, [this, alive = alive_] {
    if (!*alive) return;
    cleaned_ = true;
    MaybeFinish();
  });
}

void Command::OnExit(int status) {
  if (exit_seen_) return;
  exit_seen_ = true;
  result_.duration_ms = MonotonicMs() - started_ms_;
  if (WIFEXITED(status)) {
    result_.exited = true;
    result_.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result_.signal = WTERMSIG(status);
  }
  registry_.Remove(pid_);
  // No one to resize for; the duplicates read on until the slave closes.
  pty_.reset();
  if (options_.cleanup_on_exit) StartCleanup();
  if (stdin_) {
    loop_.Remove(stdin_.get());
    stdin_.reset();
  }
  if (out_[0] || out_[1]) {
    drain_timer_ = loop_.AddTimer(kDrainMs, [this] { EndDrain(); });
  }
  MaybeFinish();
}

void Command::EndDrain() {
  drain_timer_ = 0;
  // Held back by its reader: the process is not what keeps the pipe open.
  if (paused_) {
    drain_timer_ = loop_.AddTimer(kDrainMs, [this] { EndDrain(); });
    return;
  }
  // A loop starved for seconds (a busy host) may not yet have read what the
  // program wrote before it exited; an escaped writer gets a bounded read.
  char buf[kReadChunk];
  for (int i = 0; i < 2; ++i) {
    for (int rounds = 0; rounds < 64 && out_[i];) {
      ssize_t n = ::read(out_[i].get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      ++rounds;
      output_bytes_ += static_cast<uint64_t>(n);
      if (callbacks_.on_output)
        callbacks_.on_output(static_cast<uint8_t>(i + 1),
                             std::string_view(buf, static_cast<size_t>(n)));
    }
    lingering_[i] = false;
    CloseOutput(i);
  }
  MaybeFinish();  // may destroy this object
}

void Command::MaybeFinish() {
  if (done_ || !exit_seen_ || out_[0] || out_[1] || (cleaning_ && !cleaned_)) return;
  done_ = true;
  if (drain_timer_) {
    loop_.CancelTimer(drain_timer_);
    drain_timer_ = 0;
  }
  // May destroy this object.
  if (callbacks_.on_done) callbacks_.on_done(result_);
}

std::set<pid_t> CommandRegistry::SessionsExcept(pid_t sid) const {
  std::set<pid_t> out;
  for (const auto& [pid, cb] : by_pid_) {
    if (pid != sid) out.insert(pid);
  }
  return out;
}

void CommandRegistry::Cleanup(pid_t sid, const std::string& token, std::function<void()> done) {
  uint64_t id = next_job_++;
  jobs_[id] = CleanupJob{sid, token, MonotonicMs() + 10000, std::move(done)};
  CleanupPass(id);
}

void CommandRegistry::CleanupPass(uint64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  CleanupJob& job = it->second;
  bool time_left = MonotonicMs() < job.deadline_ms;
  // While the command's process group has members, kill it again: one cheap
  // syscall, repeated until a fork bomb's in-flight forks are caught too.
  // The /proc scan for processes that left the group comes after, when the
  // sandbox's CPU is no longer taken by the bomb.
  if (::kill(-job.sid, 0) == 0 && time_left) {
    ::kill(-job.sid, SIGKILL);
    loop_.AddTimer(5, [this, id] { CleanupPass(id); });
    return;
  }
  int killed = KillOwned(job.sid, job.token, SessionsExcept(job.sid));
  if (killed > 0 && time_left) {
    loop_.AddTimer(2, [this, id] { CleanupPass(id); });
    return;
  }
  auto done = std::move(job.done);
  jobs_.erase(it);
  if (done) done();
}

void CommandRegistry::ReapAll() {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    auto it = by_pid_.find(pid);
    if (it == by_pid_.end()) continue;
    auto cb = it->second;  // the callback may unregister itself
    cb(status);
  }
}

}  // namespace kiln::agent
