// Finding the processes a command started, for killing them when it ends.
//
// A command leads its own session. When it returns, every process of that
// session, every process whose environment carries the command's owner
// token (KILN_OWNER=...: it left the session with setsid but kept its
// environment), and every descendant of those is killed. Only a process
// that both leaves the session and clears its environment escapes; it is
// still confined to the sandbox and dies with it.
#pragma once

#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

namespace kiln::agent {

constexpr const char* kOwnerEnv = "KILN_OWNER";

struct ProcEntry {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t session = 0;
  long rss_pages = 0;
  uid_t uid = 0;
};

std::vector<ProcEntry> ScanProcs();

// The processes that belong to the owner with session `sid` and `token`.
// Sessions in `other_sessions` belong to other live owners and are never
// matched by token (saves reading their environments).
std::vector<pid_t> FindOwned(pid_t sid, const std::string& token,
                             const std::set<pid_t>& other_sessions);

// SIGKILLs what FindOwned returns (one pass); returns how many were
// signalled. A fork bomb forks between passes: callers repeat until 0.
int KillOwned(pid_t sid, const std::string& token, const std::set<pid_t>& other_sessions);

// The non-agent process with the largest resident set, or 0.
pid_t LargestProcess();

}  // namespace kiln::agent
