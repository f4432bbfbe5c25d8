#include "images/layers/fs_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

namespace kiln::images {
namespace {

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};
using DirPtr = std::unique_ptr<DIR, DirCloser>;

}  // namespace

Status ErrnoStatus(Code code, const std::string& what, int err, const std::string& path) {
  nlohmann::json details = nullptr;
  if (!path.empty()) details = {{"path", path}};
  return Status(code, what + ": " + std::strerror(err), std::move(details));
}

UniqueFd OpenDirAt(int dirfd, const std::string& name) {
  return UniqueFd(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

Result<std::vector<std::string>> ListDir(int dirfd) {
  // fdopendir takes the fd it is given, so give it its own.
  int dup = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return ErrnoStatus(Code::kIoError, "dup", errno);
  DirPtr dir(::fdopendir(dup));
  if (!dir) {
    int err = errno;
    ::close(dup);
    return ErrnoStatus(Code::kIoError, "fdopendir", err);
  }
  ::rewinddir(dir.get());
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = ::readdir(dir.get())) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      names.emplace_back(e->d_name);
    errno = 0;
  }
  if (errno != 0) return ErrnoStatus(Code::kIoError, "readdir", errno);
  std::sort(names.begin(), names.end());
  return names;
}

Status ClearDir(int dirfd, uint64_t* freed) {
  auto names = ListDir(dirfd);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    if (Status s = RemoveTreeAt(dirfd, name, freed); !s.ok()) return s;
  }
  return Status::Ok();
}

Status RemoveTreeAt(int dirfd, const std::string& name, uint64_t* freed) {
  struct stat st;
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return ErrnoStatus(Code::kIoError, "stat " + name, errno, name);
  }
  if (S_ISDIR(st.st_mode)) {
    UniqueFd sub = OpenDirAt(dirfd, name);
    if (!sub) return ErrnoStatus(Code::kIoError, "open " + name, errno, name);
    // Without root, a read-only directory must be made writable to be emptied.
    if (::geteuid() != 0 && (st.st_mode & S_IRWXU) != S_IRWXU) ::fchmod(sub.get(), S_IRWXU);
    if (Status s = ClearDir(sub.get(), freed); !s.ok()) return s;
    if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
      return ErrnoStatus(Code::kIoError, "rmdir " + name, errno, name);
    return Status::Ok();
  }
  if (::unlinkat(dirfd, name.c_str(), 0) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return ErrnoStatus(Code::kIoError, "unlink " + name, errno, name);
  }
  if (freed && S_ISREG(st.st_mode) && st.st_nlink <= 1)
    *freed += static_cast<uint64_t>(st.st_blocks) * 512;
  return Status::Ok();
}

}  // namespace kiln::images
