#include "agent/home_alias.h"

#include <dirent.h>
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace kiln::agent {

namespace {

constexpr const char* kAlias = "/home/user";

bool IsEmptyDirectory(const char* path) {
  struct stat st;
  if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(path), closedir);
  if (!dir) return false;
  while (dirent* e = readdir(dir.get()))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) return false;
  return true;
}

// Out of the bounding set (no exec can gain it back) and out of PID 1's own
// sets (its children inherit those).
void DropSysAdmin() {
  if (prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) != 0 && errno != EINVAL)
    std::perror("kiln-agent: dropping CAP_SYS_ADMIN from the bounding set");
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0) return std::perror("kiln-agent: capget");
  const int word = CAP_SYS_ADMIN / 32;
  const uint32_t bit = 1u << (CAP_SYS_ADMIN % 32);
  data[word].effective &= ~bit;
  data[word].permitted &= ~bit;
  data[word].inheritable &= ~bit;
  if (syscall(SYS_capset, &header, data) != 0) std::perror("kiln-agent: capset");
}

}  // namespace

void SetUpHomeAlias(const RunAs& run_as) {
  if (run_as.home == "/workspace" && IsEmptyDirectory(kAlias) &&
      mount(run_as.home.c_str(), kAlias, nullptr, MS_BIND, nullptr) != 0)
    std::perror("kiln-agent: binding /workspace on /home/user");
  DropSysAdmin();
}

}  // namespace kiln::agent
