#include "images/context/build_context.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/unique_fd.h"
#include "images/context/tar_extract.h"

namespace kiln::images {

Result<ContextStats> UnpackContext(const std::string& tar_path, const std::string& dest,
                                   const ContextLimits& limits, const DockerIgnore* ignore) {
  UniqueFd tar(::open(tar_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!tar) {
    return Status(errno == ENOENT ? Code::kFileNotFound : Code::kIoError,
                  "context tar " + tar_path + ": " + std::strerror(errno), {{"path", tar_path}});
  }
  struct stat st;
  if (::fstat(tar.get(), &st) != 0) {
    return Status(Code::kIoError, "stat " + tar_path + ": " + std::strerror(errno));
  }
  if (static_cast<uint64_t>(st.st_size) > limits.max_compressed) {
    return Status(Code::kPayloadTooLarge, "the build context exceeds the compressedBytes limit",
                  {{"limit", "compressedBytes"}, {"max", limits.max_compressed}});
  }
  if (::mkdir(dest.c_str(), 0755) != 0) {
    int err = errno;
    return Status(err == EEXIST ? Code::kFileExists : Code::kIoError,
                  "context dir " + dest + ": " + std::strerror(err), {{"path", dest}});
  }
  ::chmod(dest.c_str(), 0755);  // whatever the umask
  UniqueFd dest_fd(::open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  internal::ExtractOptions options;
  options.limits = limits;
  options.ignore = ignore;
  Result<ContextStats> stats =
      dest_fd ? internal::ExtractTar(tar.get(), dest_fd.get(), options)
              : Result<ContextStats>(
                    Status(Code::kIoError, "open " + dest + ": " + std::strerror(errno)));
  if (!stats.ok()) {
    std::error_code ec;
    std::filesystem::remove_all(dest, ec);  // never follows symlinks
    Status s = stats.status();
    if (s.code() == Code::kPayloadTooLarge) {
      return Status(
          s.code(),
          "the build context exceeds the " + s.details()["limit"].get<std::string>() + " limit",
          s.details());
    }
    if (s.code() == Code::kInvalidArchive) {
      std::string msg = s.message();
      if (msg.rfind("archive entry ", 0) == 0) msg = "context entry " + msg.substr(14);
      return Status(s.code(), "invalid build context: " + msg, s.details());
    }
    return s;
  }
  return stats;
}

}  // namespace kiln::images
