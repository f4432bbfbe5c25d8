#include "images/context/tar_extract.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include "common/archive_error.h"
#include "common/unique_fd.h"
#include "images/context/safe_path.h"

namespace kiln::images::internal {
namespace {

using ReadArchive = std::unique_ptr<archive, decltype(&archive_read_free)>;

ReadArchive NewReader() {
  ReadArchive a(archive_read_new(), archive_read_free);
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_bzip2(a.get());
  archive_read_support_filter_xz(a.get());
  archive_read_support_format_tar(a.get());
  archive_read_support_format_gnutar(a.get());
  return a;
}

Status Bad(const std::string& entry, const std::string& why) {
  return Status(Code::kInvalidArchive, "archive entry " + entry + ": " + why, {{"entry", entry}});
}

Status TooLarge(const char* limit, uint64_t max) {
  return Status(Code::kPayloadTooLarge, std::string("archive exceeds the ") + limit + " limit",
                {{"limit", limit}, {"max", max}});
}

struct Extractor {
  int dest_fd;
  const ExtractOptions& opt;
  ContextStats stats;
  struct DirMeta {
    std::vector<std::string> comps;
    mode_t mode;
    timespec mtime;
  };
  std::vector<DirMeta> dirs;  // applied last: a 0555 dir must still take its children

  // Opens the directory `comps[0..n)` under dest, creating missing ones
  // (0755, the extraction's owner) if `create`; never follows a symlink.
  Result<UniqueFd> OpenDir(const std::vector<std::string>& comps, size_t n, bool create,
                           const std::string& entry, uint32_t uid, uint32_t gid) {
    UniqueFd cur(::fcntl(dest_fd, F_DUPFD_CLOEXEC, 0));
    if (!cur) return Status(Code::kIoError, std::string("dup: ") + std::strerror(errno));
    for (size_t i = 0; i < n; ++i) {
      const char* name = comps[i].c_str();
      int fd = ::openat(cur.get(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0 && errno == ENOENT && create) {
        if (::mkdirat(cur.get(), name, 0755) != 0 && errno != EEXIST) {
          return Status(Code::kIoError, "mkdir for " + entry + ": " + std::strerror(errno));
        }
        ChownIfRoot(cur.get(), name, uid, gid);
        fd = ::openat(cur.get(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      }
      if (fd < 0) {
        if (errno == ELOOP) return Bad(entry, "goes through a symlink");
        if (errno == ENOTDIR) return Bad(entry, "goes through a non-directory");
        if (errno == ENOENT) return Bad(entry, "names a missing directory");
        return Status(Code::kIoError, "open for " + entry + ": " + std::strerror(errno));
      }
      cur.reset(fd);
    }
    return cur;
  }

  // Clears the way for a new non-directory at `name`: a later entry for the
  // same name replaces the earlier one, as with tar(1).
  Status MakeRoom(int dir_fd, const std::string& name, const std::string& entry) {
    struct stat st;
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return Status::Ok();
    if (S_ISDIR(st.st_mode)) return Bad(entry, "would replace a directory");
    if (::unlinkat(dir_fd, name.c_str(), 0) != 0) {
      return Status(Code::kIoError, "replace " + entry + ": " + std::strerror(errno));
    }
    return Status::Ok();
  }

  Status WriteFile(archive* a, int dir_fd, const std::string& name, const std::string& entry,
                   archive_entry* e, uint32_t uid, uint32_t gid) {
    int64_t declared = archive_entry_size(e);
    if (declared > 0 && stats.bytes + static_cast<uint64_t>(declared) > opt.limits.max_unpacked) {
      return TooLarge("unpackedBytes", opt.limits.max_unpacked);
    }
    UniqueFd out(
        ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out) return Status(Code::kIoError, "create " + entry + ": " + std::strerror(errno));
    const void* buf;
    size_t size;
    la_int64_t offset;
    int r;
    while ((r = archive_read_data_block(a, &buf, &size, &offset)) == ARCHIVE_OK) {
      if (offset < 0 || static_cast<uint64_t>(offset) + size > opt.limits.max_unpacked ||
          stats.bytes + size > opt.limits.max_unpacked) {
        return TooLarge("unpackedBytes", opt.limits.max_unpacked);
      }
      const char* p = static_cast<const char*>(buf);
      while (size > 0) {
        ssize_t n = ::pwrite(out.get(), p, size, offset);
        if (n < 0) {
          if (errno == EINTR) continue;
          return Status(errno == ENOSPC ? Code::kNoSpace : Code::kIoError,
                        "write " + entry + ": " + std::strerror(errno));
        }
        p += n;
        size -= static_cast<size_t>(n);
        offset += n;
        stats.bytes += static_cast<uint64_t>(n);
      }
    }
    if (r != ARCHIVE_EOF)
      return Bad(entry, std::string("truncated or corrupt: ") + ArchiveError(a));
    if (declared > 0 && ::ftruncate(out.get(), declared) != 0) {  // sparse tails
      return Status(Code::kIoError, "truncate " + entry + ": " + std::strerror(errno));
    }
    ChownIfRoot(out.get(), nullptr, uid, gid);
    ::fchmod(out.get(), archive_entry_perm(e) & 07777);  // after chown, which drops setuid
    timespec times[2] = {{0, UTIME_OMIT}, {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
    ::futimens(out.get(), times);
    return Status::Ok();
  }

  Status Entry(archive* a, archive_entry* e) {
    const char* raw = archive_entry_pathname(e);
    std::string entry = raw ? raw : "";
    if (entry.empty()) return Bad("(unnamed)", "has no name");
    if (entry.front() == '/' && !opt.strip_absolute) return Bad(entry, "is an absolute path");
    if (EscapesRoot(entry)) return Bad(entry, "escapes the destination");
    std::string clean = CleanPath(entry);
    if (clean == "/") return Status::Ok();  // "./": the destination itself
    std::string rel = clean.substr(1);
    if (opt.ignore && rel != ".dockerignore" && rel != "Dockerfile" && opt.ignore->Excluded(rel)) {
      return Status::Ok();
    }

    const char* hardlink = archive_entry_hardlink(e);
    mode_t type = archive_entry_filetype(e);
    if (!hardlink && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
      if (opt.skip_special) return Status::Ok();
      return Bad(entry, "is a device, fifo or socket");
    }
    if (++stats.files > opt.limits.max_files) return TooLarge("files", opt.limits.max_files);

    uint32_t uid = 0, gid = 0;
    if (opt.chown) {
      std::tie(uid, gid) = *opt.chown;
    } else if (opt.keep_owners) {
      uid = static_cast<uint32_t>(archive_entry_uid(e));
      gid = static_cast<uint32_t>(archive_entry_gid(e));
    }
    uint32_t dir_uid = opt.chown ? uid : 0, dir_gid = opt.chown ? gid : 0;
    std::vector<std::string> comps = PathParts(clean);
    const std::string& name = comps.back();
    Result<UniqueFd> parent = OpenDir(comps, comps.size() - 1, true, entry, dir_uid, dir_gid);
    if (!parent.ok()) return parent.status();
    int dir_fd = parent->get();

    if (hardlink) {
      std::string target = hardlink;
      if (target.front() == '/' && !opt.strip_absolute)
        return Bad(entry, "links to an absolute path");
      if (EscapesRoot(target) || CleanPath(target) == "/") return Bad(entry, "links outside");
      std::vector<std::string> tcomps = PathParts(target);
      Result<UniqueFd> tparent = OpenDir(tcomps, tcomps.size() - 1, false, entry, 0, 0);
      if (!tparent.ok()) return tparent.status();
      if (Status s = MakeRoom(dir_fd, name, entry); !s.ok()) return s;
      if (::linkat(tparent->get(), tcomps.back().c_str(), dir_fd, name.c_str(), 0) != 0) {
        if (errno == ENOENT) return Bad(entry, "links to " + target + ", which is not there");
        return Bad(entry, "cannot link to " + target + ": " + std::strerror(errno));
      }
      return Status::Ok();
    }
    if (type == AE_IFDIR) {
      struct stat st;
      if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
        if (Status s = MakeRoom(dir_fd, name, entry); !s.ok()) return s;
      }
      if (::mkdirat(dir_fd, name.c_str(), 0700) != 0 && errno != EEXIST) {
        return Status(Code::kIoError, "mkdir " + entry + ": " + std::strerror(errno));
      }
      ChownIfRoot(dir_fd, name.c_str(), uid, gid);
      dirs.push_back({comps,
                      static_cast<mode_t>(archive_entry_perm(e) & 07777),
                      {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}});
      return Status::Ok();
    }
    if (Status s = MakeRoom(dir_fd, name, entry); !s.ok()) return s;
    if (type == AE_IFLNK) {
      const char* target = archive_entry_symlink(e);
      // A link may point anywhere: it is data here, and nothing is ever
      // written or read through it.
      if (!target || ::symlinkat(target, dir_fd, name.c_str()) != 0) {
        return Bad(entry, std::string("cannot create symlink: ") + std::strerror(errno));
      }
      ChownIfRoot(dir_fd, name.c_str(), uid, gid);
      timespec times[2] = {{0, UTIME_OMIT}, {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
      ::utimensat(dir_fd, name.c_str(), times, AT_SYMLINK_NOFOLLOW);
      return Status::Ok();
    }
    return WriteFile(a, dir_fd, name, entry, e, uid, gid);
  }

  // Directory modes and mtimes last, deepest first.
  void FinishDirs() {
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
      Result<UniqueFd> fd = OpenDir(it->comps, it->comps.size(), false, "", 0, 0);
      if (!fd.ok()) continue;
      ::fchmod(fd->get(), it->mode);
      timespec times[2] = {{0, UTIME_OMIT}, it->mtime};
      ::futimens(fd->get(), times);
    }
  }
};

}  // namespace

void ChownIfRoot(int fd, const char* name, uint32_t uid, uint32_t gid) {
  if (::geteuid() != 0) return;
  if (name) {
    (void)::fchownat(fd, name, uid, gid, AT_SYMLINK_NOFOLLOW);
  } else {
    (void)::fchown(fd, uid, gid);
  }
}

Result<ContextStats> ExtractTar(int tar_fd, int dest_fd, const ExtractOptions& options) {
  ReadArchive a = NewReader();
  if (archive_read_open_fd(a.get(), tar_fd, 1 << 16) != ARCHIVE_OK) {
    return Status(Code::kInvalidArchive,
                  std::string("not a tar archive: ") + ArchiveError(a.get()));
  }
  Extractor x{dest_fd, options, {}, {}};
  for (;;) {
    archive_entry* e;
    int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r == ARCHIVE_FATAL || (r == ARCHIVE_RETRY)) {
      return Status(Code::kInvalidArchive,
                    std::string("corrupt tar archive: ") + ArchiveError(a.get()));
    }
    // ARCHIVE_WARN (an odd header field) still yields a usable entry.
    if (Status s = x.Entry(a.get(), e); !s.ok()) return s;
  }
  x.FinishDirs();
  return x.stats;
}

bool IsTarArchive(int fd) {
  if (::lseek(fd, 0, SEEK_SET) != 0) return false;
  bool tar = false;
  {
    ReadArchive a = NewReader();
    archive_entry* e;
    tar = archive_read_open_fd(a.get(), fd, 1 << 16) == ARCHIVE_OK &&
          archive_read_next_header(a.get(), &e) == ARCHIVE_OK;
  }
  ::lseek(fd, 0, SEEK_SET);
  return tar;
}

}  // namespace kiln::images::internal
