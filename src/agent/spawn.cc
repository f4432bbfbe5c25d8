#include "agent/spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <memory>

namespace kiln::agent {
namespace {

// Everything the child needs, prepared by the parent: the child shares the
// parent's memory and must not allocate.
struct ChildArgs {
  std::vector<std::string> candidates;  // paths to try for argv[0]
  std::vector<char*> argv;
  std::vector<char*> envp;
  const char* cwd;
  uid_t uid;
  gid_t gid;
  rlim_t max_processes;
  int fds[3];
  bool controlling_tty;
  int dev_null;
  volatile int error = 0;
  const char* volatile what = "";
};

int ChildMain(void* p) {
  auto* a = static_cast<ChildArgs*>(p);
  auto fail = [a](const char* what) {
    a->error = errno;
    a->what = what;
    _exit(127);
  };
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);
  if (setsid() < 0) fail("setsid");
  for (int i = 0; i < 3; ++i) {
    int fd = a->fds[i] >= 0 ? a->fds[i] : a->dev_null;
    if (dup2(fd, i) < 0) fail("dup2");
  }
  if (a->controlling_tty && ioctl(0, TIOCSCTTY, 0) < 0) fail("TIOCSCTTY");
  if (chdir(a->cwd) < 0) fail("chdir");
  if (a->uid != 0) {
    rlimit nproc{a->max_processes, a->max_processes};
    if (setrlimit(RLIMIT_NPROC, &nproc) < 0) fail("setrlimit");
    gid_t groups[1] = {a->gid};
    if (setgroups(1, groups) < 0) fail("setgroups");
    if (setgid(a->gid) < 0) fail("setgid");
    if (setuid(a->uid) < 0) fail("setuid");
  }
  int err = ENOENT;
  for (auto& path : a->candidates) {
    execve(path.c_str(), a->argv.data(), a->envp.data());
    // Remember the most telling failure, as a shell does.
    if (errno != ENOENT && errno != ENOTDIR) err = errno;
  }
  errno = err;
  fail("exec");
  return 127;
}

}  // namespace

std::string EnvValue(const std::vector<std::string>& env, std::string_view name) {
  for (const auto& kv : env) {
    if (kv.size() > name.size() && kv.compare(0, name.size(), name) == 0 && kv[name.size()] == '=')
      return kv.substr(name.size() + 1);
  }
  return "";
}

SpawnResult Spawn(const SpawnSpec& spec) {
  SpawnResult result;
  if (spec.argv.empty() || spec.argv[0].empty()) {
    result.error = ENOENT;
    result.what = "exec";
    return result;
  }
  auto a = std::make_unique<ChildArgs>();
  const std::string& prog = spec.argv[0];
  if (prog.find('/') != std::string::npos) {
    a->candidates.push_back(prog);
  } else {
    std::string path = EnvValue(spec.env, "PATH");
    if (path.empty()) path = "/usr/local/bin:/usr/bin:/bin";
    size_t start = 0;
    while (start <= path.size()) {
      size_t end = path.find(':', start);
      if (end == std::string::npos) end = path.size();
      std::string dir = path.substr(start, end - start);
      a->candidates.push_back((dir.empty() ? "." : dir) + "/" + prog);
      start = end + 1;
    }
  }
  for (const auto& s : spec.argv) a->argv.push_back(const_cast<char*>(s.c_str()));
  a->argv.push_back(nullptr);
  for (const auto& s : spec.env) a->envp.push_back(const_cast<char*>(s.c_str()));
  a->envp.push_back(nullptr);
  a->cwd = spec.cwd.c_str();
  a->uid = spec.uid;
  a->gid = spec.gid;
  a->max_processes = spec.max_processes;
  a->fds[0] = spec.stdin_fd;
  a->fds[1] = spec.stdout_fd;
  a->fds[2] = spec.stderr_fd;
  a->controlling_tty = spec.controlling_tty;
  a->dev_null = ::open("/dev/null", O_RDWR | O_CLOEXEC);

  constexpr size_t kStack = 64 * 1024;
  auto stack = std::make_unique<char[]>(kStack);
  pid_t pid = clone(ChildMain, stack.get() + kStack, CLONE_VM | CLONE_VFORK | SIGCHLD, a.get());
  int clone_errno = errno;
  if (a->dev_null >= 0) ::close(a->dev_null);
  if (pid < 0) {
    result.error = clone_errno;
    result.what = "clone";
    return result;
  }
  // With CLONE_VFORK we resume only once the child has exec'd or exited.
  result.pid = pid;
  if (a->error != 0) {
    result.error = a->error;
    result.what = a->what;
  }
  return result;
}

}  // namespace kiln::agent
