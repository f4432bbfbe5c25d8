#include "images/build_context.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "common/digest.h"
#include "common/unique_fd.h"
#include "images/archive_error.h"
#include "images/tar_extract.h"

namespace kiln::images {
namespace {

bool AlwaysKept(const std::string& rel) { return rel == ".dockerignore" || rel == "Dockerfile"; }

struct Found {
  std::string rel;
  struct stat st;
  std::string link;  // symlink target
};

// Lists `dir` recursively into `out` (unsorted), skipping what `ignore`
// excludes; excluded directories are still entered when an exception ("!")
// might re-include something under them.
Status Walk(const std::string& root, const std::string& rel, const DockerIgnore* ignore,
            const struct stat& tar_st, std::vector<Found>* out) {
  std::string path = rel.empty() ? root : root + "/" + rel;
  struct CloseDir {
    void operator()(DIR* d) const { ::closedir(d); }
  };
  std::unique_ptr<DIR, CloseDir> d(::opendir(path.c_str()));
  if (!d) {
    return Status(Code::kIoError, "read " + path + ": " + std::strerror(errno), {{"path", path}});
  }
  while (dirent* de = ::readdir(d.get())) {
    std::string name = de->d_name;
    if (name == "." || name == "..") continue;
    Found f;
    f.rel = rel.empty() ? name : rel + "/" + name;
    std::string full = root + "/" + f.rel;
    if (::lstat(full.c_str(), &f.st) != 0) {
      return Status(Code::kIoError, "stat " + full + ": " + std::strerror(errno), {{"path", full}});
    }
    if (f.st.st_dev == tar_st.st_dev && f.st.st_ino == tar_st.st_ino) continue;  // our own output
    bool excluded = ignore && !AlwaysKept(f.rel) && ignore->Excluded(f.rel);
    if (S_ISDIR(f.st.st_mode)) {
      if (!excluded || ignore->HasExceptions()) {
        if (Status s = Walk(root, f.rel, ignore, tar_st, out); !s.ok()) return s;
      }
    } else if (S_ISLNK(f.st.st_mode)) {
      std::vector<char> buf(std::max<size_t>(static_cast<size_t>(f.st.st_size) + 1, 4096));
      ssize_t n = ::readlink(full.c_str(), buf.data(), buf.size());
      if (n < 0) return Status(Code::kIoError, "readlink " + full + ": " + std::strerror(errno));
      f.link.assign(buf.data(), static_cast<size_t>(n));
    } else if (!S_ISREG(f.st.st_mode)) {
      continue;  // sockets, fifos, devices: not context material
    }
    if (!excluded) out->push_back(std::move(f));
  }
  return Status::Ok();
}

using WriteArchive = std::unique_ptr<archive, decltype(&archive_write_free)>;
using Entry = std::unique_ptr<archive_entry, decltype(&archive_entry_free)>;

Status WriteTar(const std::string& dir, const std::string& tar_path,
                const std::vector<Found>& found) {
  WriteArchive a(archive_write_new(), archive_write_free);
  auto fail = [&](const std::string& what) {
    return Status(Code::kIoError, what + ": " + ArchiveError(a.get()), {{"path", tar_path}});
  };
  archive_write_add_filter_gzip(a.get());
  // A gzip header stamped with the time would make every pack differ.
  archive_write_set_filter_option(a.get(), "gzip", "timestamp", nullptr);
  archive_write_set_format_pax_restricted(a.get());
  if (archive_write_open_filename(a.get(), tar_path.c_str()) != ARCHIVE_OK) {
    return fail("create " + tar_path);
  }
  std::vector<char> buf(1 << 20);
  for (const Found& f : found) {
    Entry e(archive_entry_new(), archive_entry_free);
    archive_entry_set_pathname(e.get(), f.rel.c_str());
    archive_entry_set_perm(e.get(), f.st.st_mode & 07777);
    archive_entry_set_uid(e.get(), 0);
    archive_entry_set_gid(e.get(), 0);
    archive_entry_set_mtime(e.get(), 0, 0);
    UniqueFd in;
    if (S_ISDIR(f.st.st_mode)) {
      archive_entry_set_filetype(e.get(), AE_IFDIR);
    } else if (S_ISLNK(f.st.st_mode)) {
      archive_entry_set_filetype(e.get(), AE_IFLNK);
      archive_entry_set_perm(e.get(), 0777);
      archive_entry_set_symlink(e.get(), f.link.c_str());
    } else {
      std::string full = dir + "/" + f.rel;
      in.reset(::open(full.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (!in) {
        return Status(Code::kIoError, "open " + full + ": " + std::strerror(errno),
                      {{"path", full}});
      }
      archive_entry_set_filetype(e.get(), AE_IFREG);
      archive_entry_set_size(e.get(), f.st.st_size);
    }
    if (archive_write_header(a.get(), e.get()) < ARCHIVE_WARN) return fail("write " + f.rel);
    if (!in) continue;
    int64_t left = f.st.st_size;  // as listed: a file growing meanwhile must not break the tar
    while (left > 0) {
      ssize_t n = ::read(in.get(), buf.data(), std::min<int64_t>(left, buf.size()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return Status(Code::kIoError, f.rel + " changed while it was packed", {{"path", f.rel}});
      }
      if (archive_write_data(a.get(), buf.data(), static_cast<size_t>(n)) != n) {
        return fail("write " + f.rel);
      }
      left -= n;
    }
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK) return fail("finish " + tar_path);
  return Status::Ok();
}

}  // namespace

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

Result<std::string> PackContext(const std::string& dir, const std::string& tar_path,
                                const DockerIgnore* ignore) {
  struct stat dst;
  if (::stat(dir.c_str(), &dst) != 0 || !S_ISDIR(dst.st_mode)) {
    return Status(Code::kFileNotFound, "context dir " + dir + " is not a directory",
                  {{"path", dir}});
  }
  struct stat tar_st {};
  if (::stat(tar_path.c_str(), &tar_st) != 0) tar_st = {};
  std::vector<Found> found;
  if (Status s = Walk(dir, "", ignore, tar_st, &found); !s.ok()) return s;
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.rel < b.rel; });
  if (Status s = WriteTar(dir, tar_path, found); !s.ok()) {
    ::unlink(tar_path.c_str());
    return s;
  }
  std::string sha = FileSha256Hex(tar_path);
  if (sha.empty()) return Status(Code::kIoError, "read back " + tar_path, {{"path", tar_path}});
  return sha;
}

}  // namespace kiln::images
