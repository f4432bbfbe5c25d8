#include "agent/proc_scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>

#include "common/unique_fd.h"

namespace kiln::agent {
namespace {

std::string ReadSmallFile(const std::string& path, size_t max = 64 * 1024) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return "";
  std::string out;
  char buf[4096];
  while (out.size() < max) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool ParseStat(const std::string& stat, ProcEntry& e) {
  // "pid (comm) state ppid pgrp session ..."; comm may contain spaces and ')'.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return false;
  const char* p = stat.c_str() + close + 2;
  char state;
  int ppid, pgrp, session;
  if (std::sscanf(p, "%c %d %d %d", &state, &ppid, &pgrp, &session) != 4) return false;
  if (state == 'Z' || state == 'X') return false;  // already dead
  e.ppid = ppid;
  e.session = session;
  // Field 24 (rss) counting from "state" as field 3.
  int field = 3;
  for (const char* q = p; *q; ++q) {
    if (*q == ' ' && ++field == 24) {
      e.rss_pages = std::strtol(q + 1, nullptr, 10);
      break;
    }
  }
  return true;
}

bool HasToken(pid_t pid, const std::string& token) {
  std::string env = ReadSmallFile("/proc/" + std::to_string(pid) + "/environ", 1 << 20);
  std::string want = std::string(kOwnerEnv) + "=" + token;
  size_t pos = 0;
  while (pos < env.size()) {
    size_t end = env.find('\0', pos);
    if (end == std::string::npos) end = env.size();
    if (env.compare(pos, end - pos, want) == 0) return true;
    pos = end + 1;
  }
  return false;
}

}  // namespace

std::vector<ProcEntry> ScanProcs() {
  std::vector<ProcEntry> out;
  DIR* dir = opendir("/proc");
  if (!dir) return out;
  while (dirent* d = readdir(dir)) {
    char* end;
    long pid = std::strtol(d->d_name, &end, 10);
    if (*end != '\0' || pid <= 1) continue;
    ProcEntry e;
    e.pid = static_cast<pid_t>(pid);
    if (ParseStat(ReadSmallFile("/proc/" + std::string(d->d_name) + "/stat"), e)) out.push_back(e);
  }
  closedir(dir);
  return out;
}

std::vector<pid_t> FindOwned(pid_t sid, const std::string& token,
                             const std::set<pid_t>& other_sessions) {
  auto procs = ScanProcs();
  std::set<pid_t> owned;
  std::multimap<pid_t, pid_t> children;
  for (const auto& p : procs) {
    children.emplace(p.ppid, p.pid);
    if (p.session == sid) {
      owned.insert(p.pid);
    } else if (!other_sessions.count(p.session) && HasToken(p.pid, token)) {
      owned.insert(p.pid);
    }
  }
  std::vector<pid_t> queue(owned.begin(), owned.end());
  while (!queue.empty()) {
    pid_t p = queue.back();
    queue.pop_back();
    auto [lo, hi] = children.equal_range(p);
    for (auto it = lo; it != hi; ++it) {
      if (owned.insert(it->second).second) queue.push_back(it->second);
    }
  }
  return {owned.begin(), owned.end()};
}

int KillOwned(pid_t sid, const std::string& token, const std::set<pid_t>& other_sessions) {
  // One syscall takes down the whole process group (the command leads it,
  // and background jobs of a script stay in it): a fork bomb dies before
  // the /proc scan below, which is slow while thousands of tasks compete
  // for the sandbox's CPU.
  ::kill(-sid, SIGKILL);
  int n = 0;
  for (pid_t p : FindOwned(sid, token, other_sessions)) {
    if (p > 1 && ::kill(p, SIGKILL) == 0) ++n;
  }
  return n;
}

pid_t LargestProcess() {
  pid_t best = 0;
  long best_rss = -1;
  for (const auto& p : ScanProcs()) {
    if (p.rss_pages > best_rss) {
      best = p.pid;
      best_rss = p.rss_pages;
    }
  }
  return best;
}

}  // namespace kiln::agent
