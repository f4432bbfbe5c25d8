#include "images/context/safe_path.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kiln::images {

Result<UniqueFd> OpenInRoot(const std::string& root, const std::string& path, int flags) {
  UniqueFd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) {
    return Status(errno == ENOENT || errno == ENOTDIR ? Code::kFileNotFound : Code::kIoError,
                  "image root " + root + ": " + std::strerror(errno), {{"path", root}});
  }
  const std::string clean = CleanPath(path);
  const std::string rel = clean.size() > 1 ? clean.substr(1) : std::string(".");
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  // openat2 refuses a mode without O_CREAT/O_TMPFILE (whose bits include O_DIRECTORY's).
  how.mode = ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) ? 0644 : 0;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  long fd;
  int tries = 0;  // EAGAIN: a rename raced the lookup; the kernel asks to retry
  do {
    fd = ::syscall(SYS_openat2, root_fd.get(), rel.c_str(), &how, sizeof(how));
  } while (fd < 0 && (errno == EINTR || errno == EAGAIN) && ++tries < 16);
  if (fd < 0) {
    int err = errno;
    return Status(err == ENOENT || err == ENOTDIR ? Code::kFileNotFound : Code::kIoError,
                  path + " in the image: " + std::strerror(err), {{"path", path}});
  }
  return UniqueFd(static_cast<int>(fd));
}

}  // namespace kiln::images
