#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "common/time.h"
#include "common/unique_fd.h"

extern char** environ;

namespace kiln {
namespace {

struct Reaper {
  std::mutex mu;
  std::condition_variable cv;
  std::map<pid_t, int> statuses;  // exited, not yet collected by a waiter
  std::map<pid_t, bool> waited;   // pids somebody will WaitProcess for
  int children = 0;               // started and not yet reaped (approx.)
};

// Never destroyed: the detached reaper thread waits on it until the process
// ends, and destroying a condition variable with a waiter hangs exit.
Reaper& R() {
  static Reaper* r = new Reaper;
  return *r;
}

void ReapLoop() {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      // No children right now: wait until one is started.
      std::unique_lock lock(R().mu);
      R().cv.wait_for(lock, std::chrono::milliseconds(200));
      continue;
    }
    std::lock_guard lock(R().mu);
    if (R().waited.count(pid)) {
      R().statuses[pid] = status;
      R().cv.notify_all();
    }
  }
}

}  // namespace

bool ProcessOutput::ok() const {
  return !over_limit && status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string ProcessOutput::Describe() const {
  if (status < 0) return "did not finish";
  std::string s = WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                    : "signal " + std::to_string(WTERMSIG(status));
  std::string tail = err.size() > 800 ? err.substr(err.size() - 800) : err;
  return s + (tail.empty() ? "" : ": " + tail);
}

void StartChildReaper() {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  std::thread(ReapLoop).detach();
}

pid_t SpawnProcess(const std::vector<std::string>& argv, int in_fd, int out_fd, int err_fd,
                   const std::vector<std::string>& env, const std::string& cwd) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  for (char** e = environ; *e; ++e) {
    std::string_view kv(*e);
    bool replaced = false;
    for (const auto& mine : env)
      replaced = replaced || kv.substr(0, kv.find('=') + 1) == mine.substr(0, mine.find('=') + 1);
    if (!replaced) envp.push_back(*e);
  }
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  int fds[3] = {in_fd, out_fd, err_fd};
  for (int i = 0; i < 3; ++i) {
    if (fds[i] >= 0) {
      posix_spawn_file_actions_adddup2(&fa, fds[i], i);
    } else {
      posix_spawn_file_actions_addopen(&fa, i, "/dev/null", i == 0 ? O_RDONLY : O_WRONLY, 0);
    }
  }
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid;
  std::unique_lock lock(R().mu);
  int rc = posix_spawnp(&pid, args[0], &fa, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  R().waited[pid] = true;
  R().cv.notify_all();
  return pid;
}

int WaitProcess(pid_t pid, int timeout_ms) {
  std::unique_lock lock(R().mu);
  auto done = [&] { return R().statuses.count(pid) > 0; };
  if (!R().cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), done)) {
    ::kill(pid, SIGKILL);
    R().cv.wait_for(lock, std::chrono::seconds(5), done);
    if (!done()) return -1;
    R().statuses.erase(pid);
    R().waited.erase(pid);
    return -1;
  }
  int status = R().statuses[pid];
  R().statuses.erase(pid);
  R().waited.erase(pid);
  return status;
}

ProcessOutput RunProcess(const std::vector<std::string>& argv, int timeout_ms, size_t max_bytes,
                         const std::vector<std::string>& env) {
  ProcessOutput result;
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) < 0) return result;
  if (pipe2(err, O_CLOEXEC) < 0) {
    close(out[0]);
    close(out[1]);
    return result;
  }
  UniqueFd out_r(out[0]), out_w(out[1]), err_r(err[0]), err_w(err[1]);
  pid_t pid = SpawnProcess(argv, -1, out_w.get(), err_w.get(), env);
  out_w.reset();
  err_w.reset();
  if (pid < 0) {
    result.err = "cannot start " + argv[0];
    return result;
  }
  int64_t deadline = MonotonicNowMs() + timeout_ms;
  pollfd pfds[2] = {{out_r.get(), POLLIN, 0}, {err_r.get(), POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    int64_t left = deadline - MonotonicNowMs();
    if (left <= 0) break;
    if (poll(pfds, 2, static_cast<int>(left)) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (pfds[i].fd < 0 || !(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[8192];
      ssize_t n = ::read(pfds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        pfds[i].fd = -1;
        --open_fds;
      } else {
        std::string& into = i == 0 ? result.out : result.err;
        if (into.size() + static_cast<size_t>(n) > max_bytes) {
          result.over_limit = true;
          ::kill(pid, SIGKILL);
          open_fds = 0;
          break;
        }
        into.append(buf, static_cast<size_t>(n));
      }
    }
  }
  int64_t left = std::max<int64_t>(deadline - MonotonicNowMs(), 100);
  result.status = WaitProcess(pid, static_cast<int>(left));
  return result;
}

}  // namespace kiln
