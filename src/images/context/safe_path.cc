#include "images/context/safe_path.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace kiln::images {
namespace {

std::vector<std::string_view> Split(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

}  // namespace

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

std::string CleanPath(std::string_view path) {
  std::vector<std::string_view> out;
  for (std::string_view part : Split(path)) {
    if (part == ".") continue;
    if (part == "..") {
      if (!out.empty()) out.pop_back();
      continue;
    }
    out.push_back(part);
  }
  std::string clean;
  for (std::string_view part : out) {
    clean += '/';
    clean += part;
  }
  return clean.empty() ? "/" : clean;
}

bool EscapesRoot(std::string_view path) {
  int depth = 0;
  for (std::string_view part : Split(path)) {
    if (part == ".") continue;
    if (part == "..") {
      if (--depth < 0) return true;
    } else {
      ++depth;
    }
  }
  return false;
}

std::vector<std::string> PathParts(std::string_view path) {
  std::string clean = CleanPath(path);
  std::vector<std::string> out;
  size_t i = 1;  // `clean` starts with "/"
  while (i < clean.size()) {
    size_t j = clean.find('/', i);
    if (j == std::string::npos) j = clean.size();
    out.push_back(clean.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

}  // namespace kiln::images
