// Running host programs (runsc) from a multi-threaded daemon.
//
// kilnd is a child subreaper: runsc's sandbox processes are re-parented to
// it when `runsc run --detach` exits, and the host's PID 1 here does not
// reap. One reaper thread therefore owns waitpid(); code that waits for a
// child it started registers the pid and is handed the status.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace kiln {

struct ProcessOutput {
  int status = -1;  // raw wait status; -1 if it could not run or timed out
  std::string out;
  std::string err;
  bool over_limit = false;  // it wrote more than RunProcess's max_bytes: killed
  bool ok() const;          // exited with 0 (and stayed within max_bytes)
  std::string Describe() const;
};

// Makes this process a child subreaper and starts the reaper thread.
void StartChildReaper();

// Starts `argv` with the given stdio fds (-1 = /dev/null) and returns its
// pid, or -1 with errno set. `env`: "K=V" entries added to (or replacing
// those of) kilnd's environment.
// `cwd`: the child's working directory ("" = the caller's).
pid_t SpawnProcess(const std::vector<std::string>& argv, int in_fd, int out_fd, int err_fd,
                   const std::vector<std::string>& env = {}, const std::string& cwd = "");

// Waits for a pid started by SpawnProcess; returns the wait status, or -1
// after timeout_ms (the process is then killed).
int WaitProcess(pid_t pid, int timeout_ms);

// Runs `argv` to completion, capturing stdout and stderr, each up to
// max_bytes: a program that writes more (a registry's answer relayed by
// skopeo is the tenant's to choose) is killed and the result is not ok().
ProcessOutput RunProcess(const std::vector<std::string>& argv, int timeout_ms = 60000,
                         size_t max_bytes = 16u << 20, const std::vector<std::string>& env = {});

}  // namespace kiln
