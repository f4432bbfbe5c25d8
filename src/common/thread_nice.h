// Runs the calling thread at a lower CPU priority for a scope: work kilnd does
// for one key on a request thread (a snapshot's import or export: checksums,
// unpacking, tar) then yields to the sandboxes' own CPU on a busy host.
#pragma once

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace kiln {

class ScopedThreadNice {
 public:
  explicit ScopedThreadNice(int nice) : tid_(static_cast<id_t>(::syscall(SYS_gettid))) {
    errno = 0;
    int before = ::getpriority(PRIO_PROCESS, tid_);
    if (errno != 0) return;
    before_ = before;
    changed_ = ::setpriority(PRIO_PROCESS, tid_, nice) == 0;
  }
  ~ScopedThreadNice() {
    // Back to what it was (root may raise it again): the thread serves others next.
    if (changed_) ::setpriority(PRIO_PROCESS, tid_, before_);
  }
  ScopedThreadNice(const ScopedThreadNice&) = delete;
  ScopedThreadNice& operator=(const ScopedThreadNice&) = delete;

 private:
  id_t tid_;
  int before_ = 0;
  bool changed_ = false;
};

}  // namespace kiln
