// Starting a program in the sandbox. Uses clone(CLONE_VM | CLONE_VFORK):
// copying the agent's address space (fork) costs milliseconds inside gVisor,
// sharing it until execve costs nothing.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace kiln::agent {

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] without '/' is looked up in PATH of `env`
  std::vector<std::string> env;   // "NAME=value"
  std::string cwd = "/";
  uid_t uid = 0;
  gid_t gid = 0;
  // RLIMIT_NPROC for a non-root command (gVisor enforces it per uid): the
  // bound that keeps a fork bomb from taking the sandbox down.
  rlim_t max_processes = 1024;
  // Child ends of its stdio; -1 means /dev/null.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  // Its stdin is a terminal's slave: make it the new session's controlling
  // terminal (TIOCSCTTY), so job control, ^C and SIGWINCH reach it.
  bool controlling_tty = false;
};

struct SpawnResult {
  pid_t pid = -1;    // the child; it leads a new session (setsid)
  int error = 0;     // errno when the program could not be started
  std::string what;  // which step failed: "chdir", "exec", "setuid", ...
};

SpawnResult Spawn(const SpawnSpec& spec);

// The value of NAME in a "NAME=value" list, or "" when absent.
std::string EnvValue(const std::vector<std::string>& env, std::string_view name);

}  // namespace kiln::agent
