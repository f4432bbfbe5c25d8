#include "images/layers/layer_writer.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>

#include "images/layers/fs_tree.h"

namespace kiln::images {
namespace {

// "a/b/c" -> ("a/b", "c"); "c" -> ("", "c").
std::pair<std::string, std::string> SplitPath(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

Status Invalid(const std::string& message, const std::string& entry) {
  return Status(Code::kInvalidImage, message, {{"path", entry}});
}

// What a tar entry's header says of it: its atime is its own, else its mtime.
LayerNode NodeOfEntry(archive_entry* e) {
  LayerNode node;
  node.type = archive_entry_filetype(e);
  node.mode = archive_entry_perm(e) & 07777;
  node.uid = static_cast<uid_t>(archive_entry_uid(e));
  node.gid = static_cast<gid_t>(archive_entry_gid(e));
  node.mtime = {archive_entry_mtime(e), archive_entry_mtime_nsec(e)};
  node.atime = archive_entry_atime_is_set(e)
                   ? timespec{archive_entry_atime(e), archive_entry_atime_nsec(e)}
                   : node.mtime;
  const char* target = archive_entry_symlink(e);
  node.link_target = target ? target : "";
  return node;
}

// The key FinishDirs finds a directory again by: `path` cleaned and
// relative (Entry's paths are already; Put's may be absolute in-image ones).
std::string DirKey(const std::string& path) {
  std::string relative = path.substr(std::min(path.find_first_not_of('/'), path.size()));
  return CleanLayerPath(relative).value_or(relative);
}

}  // namespace

bool HasPathPrefix(const std::string& path, const std::string& prefix) {
  return path == prefix ||
         (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
          path[prefix.size()] == '/');
}

Result<UniqueFd> LayerWriter::OpenDir(const std::string& dir, bool create, const std::string& entry,
                                      const DirWalk& walk) {
  UniqueFd cur(::fcntl(root_, F_DUPFD_CLOEXEC, 0));
  if (!cur) return FsError("dup for", entry, errno);
  std::string walked;
  size_t start = 0;
  while (start < dir.size()) {
    size_t end = dir.find('/', start);
    if (end == std::string::npos) end = dir.size();
    std::string comp = dir.substr(start, end - start);
    walked += (walked.empty() ? "" : "/") + comp;
    start = end + 1;
    UniqueFd next = OpenDirAt(cur.get(), comp);
    if (!next && errno == ENOENT && create) {
      if (::mkdirat(cur.get(), comp.c_str(), 0755) != 0 && errno != EEXIST)
        return FsError("mkdir", walked, errno);
      next = OpenDirAt(cur.get(), comp);
      if (next && walk.made) {
        LayerNode node = walk.made(walked);
        if (root_user_ && ::fchown(next.get(), node.uid, node.gid) != 0)
          return FsError("chown", walked, errno);
        if (::fchmod(next.get(), node.mode & 07777) != 0) return FsError("chmod", walked, errno);
        timespec times[2] = {node.atime, node.mtime};
        if ((times[0].tv_nsec != UTIME_OMIT || times[1].tv_nsec != UTIME_OMIT) &&
            ::futimens(next.get(), times) != 0)
          return FsError("utimensat", walked, errno);
      } else if (next) {
        ::fchmod(next.get(), 0755);  // whatever the daemon's umask
      }
    }
    if (!next) {
      int err = errno;
      struct stat st;
      if ((err == ELOOP || err == ENOTDIR) &&
          ::fstatat(cur.get(), comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (walk.blocked) return walk.blocked(walked);
        if (S_ISLNK(st.st_mode))
          return Invalid("entry " + entry + " goes through the symlink " + walked, entry);
        return Invalid("entry " + entry + ": " + walked + " is not a directory", entry);
      }
      if (err == ENOENT)
        return Invalid("entry " + entry + ": " + walked + " does not exist", entry);
      return FsError("open", walked, err);
    }
    cur = std::move(next);
  }
  return cur;
}

// Clears the way for a new `name`: a directory that stays a directory is
// kept (tars may list one twice), anything else is removed.
Status LayerWriter::Replace(int parent, const std::string& name, bool keep_dir,
                            const std::string& entry) {
  struct stat st;
  if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? Status::Ok() : FsError("stat", entry, errno);
  if (keep_dir && S_ISDIR(st.st_mode)) return Status::Ok();
  return RemoveTreeAt(parent, name);
}

Status LayerWriter::WriteFile(LayerTarReader& reader, archive_entry* e, int fd,
                              const std::string& entry) {
  const void* buf;
  size_t size;
  la_int64_t offset;
  for (;;) {
    int rc = archive_read_data_block(reader.tar(), &buf, &size, &offset);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) return reader.TarError("entry " + entry);
    if (options_.max_bytes && stats_.bytes + size > options_.max_bytes)
      return Status(Code::kQuotaExceeded,
                    "layer is larger than the limit of " + std::to_string(options_.max_bytes) +
                        " bytes (at " + entry + ")",
                    {{"path", entry}, {"limit_bytes", options_.max_bytes}});
    const char* p = static_cast<const char*>(buf);
    while (size > 0) {
      ssize_t n = ::pwrite(fd, p, size, offset);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return FsError("write", entry, errno);
      p += n;
      offset += n;
      size -= static_cast<size_t>(n);
      stats_.bytes += static_cast<uint64_t>(n);
    }
  }
  // A sparse file's tail is a hole that no data block covers.
  if (archive_entry_size_is_set(e) && ::ftruncate(fd, archive_entry_size(e)) != 0)
    return FsError("truncate", entry, errno);
  return Status::Ok();
}

Status LayerWriter::SetXattrs(archive_entry* e, int parent, const std::string& name, int fd,
                              const std::string& entry) {
  const char* key;
  const void* value;
  size_t size;
  std::string proc_path;
  archive_entry_xattr_reset(e);
  while (archive_entry_xattr_next(e, &key, &value, &size) == ARCHIVE_OK) {
    if (std::string_view(key).rfind("trusted.overlay.", 0) == 0) continue;
    int rc;
    if (fd >= 0) {
      rc = ::fsetxattr(fd, key, value, size, 0);
    } else {
      // Symlinks and fifos cannot be opened for this; the parent's fd names
      // the directory without a path walk, and the l- call does not follow.
      proc_path = "/proc/self/fd/" + std::to_string(parent) + "/" + name;
      rc = ::lsetxattr(proc_path.c_str(), key, value, size, 0);
    }
    // A file system without xattrs (or, without root, trusted.*) loses them.
    if (rc != 0 && errno != ENOTSUP && !(errno == EPERM && !root_user_))
      return FsError(std::string("setxattr ") + key + " on", entry, errno);
  }
  return Status::Ok();
}

Status LayerWriter::SetMetadata(const LayerNode& node, archive_entry* xattrs, int parent,
                                const std::string& name, int fd, const std::string& entry) {
  bool is_link = node.type == S_IFLNK;
  if (root_user_) {
    int rc = fd >= 0 ? ::fchown(fd, node.uid, node.gid)
                     : ::fchownat(parent, name.c_str(), node.uid, node.gid, AT_SYMLINK_NOFOLLOW);
    if (rc != 0) return FsError("chown", entry, errno);
  }
  if (!is_link) {
    mode_t mode = node.mode & 07777;
    int rc = fd >= 0 ? ::fchmod(fd, mode) : ::fchmodat(parent, name.c_str(), mode, 0);
    if (rc != 0) return FsError("chmod", entry, errno);
  }
  if (xattrs) {
    if (Status s = SetXattrs(xattrs, parent, name, is_link ? -1 : fd, entry); !s.ok()) return s;
  }
  if (node.type == S_IFDIR) return Status::Ok();  // set by FinishDirs
  timespec times[2] = {node.atime, node.mtime};
  int rc = fd >= 0 ? ::futimens(fd, times)
                   : ::utimensat(parent, name.c_str(), times, AT_SYMLINK_NOFOLLOW);
  if (rc != 0) return FsError("utimensat", entry, errno);
  return Status::Ok();
}

Status LayerWriter::Place(int parent, const std::string& name, const std::string& path,
                          const LayerNode& node, archive_entry* xattrs,
                          const std::function<Status(int fd)>& write_data) {
  if (Status s = Replace(parent, name, false, path); !s.ok()) return s;
  switch (node.type) {
    case S_IFREG: {
      UniqueFd fd(::openat(parent, name.c_str(),
                           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!fd) return FsError("create", path, errno);
      if (write_data) {
        if (Status s = write_data(fd.get()); !s.ok()) return s;
      }
      return SetMetadata(node, xattrs, parent, name, fd.get(), path);
    }
    case S_IFLNK:
      if (::symlinkat(node.link_target.c_str(), parent, name.c_str()) != 0)
        return FsError("symlink", path, errno);
      return SetMetadata(node, xattrs, parent, name, -1, path);
    case S_IFIFO:
      if (::mkfifoat(parent, name.c_str(), 0600) != 0) return FsError("mkfifo", path, errno);
      return SetMetadata(node, xattrs, parent, name, -1, path);
    default:
      return Invalid("entry " + path + " has an unsupported type", path);
  }
}

Result<UniqueFd> LayerWriter::PlaceDir(int parent, const std::string& name, const std::string& path,
                                       const LayerNode& node, archive_entry* xattrs,
                                       bool mode_last) {
  if (Status s = Replace(parent, name, true, path); !s.ok()) return s;
  if (::mkdirat(parent, name.c_str(), 0700) != 0 && errno != EEXIST)
    return FsError("mkdir", path, errno);
  UniqueFd fd = OpenDirAt(parent, name);
  if (!fd) return FsError("open", path, errno);
  DirFinish& finish = dirs_[DirKey(path)];
  finish.mode = mode_last ? std::optional<mode_t>(node.mode & 07777) : std::nullopt;
  finish.times[0] = node.atime;
  finish.times[1] = node.mtime;
  if (!mode_last) {
    if (Status s = SetMetadata(node, xattrs, parent, name, fd.get(), path); !s.ok()) return s;
  } else if (root_user_ && ::fchown(fd.get(), node.uid, node.gid) != 0) {
    return FsError("chown", path, errno);
  }
  return fd;
}

Result<UniqueFd> LayerWriter::Put(int parent, const std::string& name, const std::string& path,
                                  const LayerNode& node,
                                  const std::function<Status(int fd)>& write_data) {
  if (node.type == S_IFDIR) return PlaceDir(parent, name, path, node, nullptr, true);
  if (Status s = Place(parent, name, path, node, nullptr, write_data); !s.ok()) return s;
  return UniqueFd();
}

Status LayerWriter::MakeWhiteout(int parent, const std::string& name, const std::string& entry) {
  std::string marker = ".wh." + name;
  if (Status s = Replace(parent, marker, false, entry); !s.ok()) return s;
  UniqueFd fd(
      ::openat(parent, marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd) return FsError("create whiteout for", entry, errno);
  ++stats_.whiteouts;
  return Status::Ok();
}

Status LayerWriter::HardLink(archive_entry* e, int parent, const std::string& name,
                             const std::string& entry) {
  std::optional<std::string> target = CleanLayerPath(archive_entry_hardlink(e));
  if (!target || target->empty())
    return Invalid("hard link " + entry + " points outside the layer", entry);
  if (whiteout_devices_.count(*target)) {
    whiteout_devices_.insert(entry);
    return MakeWhiteout(parent, name, entry);
  }
  if (skipped_.count(*target)) {
    skipped_.insert(entry);
    return Status::Ok();
  }
  for (const std::string& prefix : options_.skip_prefixes)
    if (HasPathPrefix(*target, prefix)) return Status::Ok();
  auto [tdir, tname] = SplitPath(*target);
  auto tparent = OpenDir(tdir, false, entry);
  if (!tparent.ok()) return tparent.status();
  struct stat st;
  if (::fstatat(tparent->get(), tname.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return Invalid("hard link " + entry + " to " + *target + ", which is not in the layer", entry);
  if (S_ISDIR(st.st_mode))
    return Invalid("hard link " + entry + " to the directory " + *target, entry);
  if (*target == entry) return Status::Ok();
  if (Status s = Replace(parent, name, false, entry); !s.ok()) return s;
  if (::linkat(tparent->get(), tname.c_str(), parent, name.c_str(), 0) != 0)
    return FsError("link", entry, errno);
  if (S_ISREG(st.st_mode)) ++stats_.files;
  return Status::Ok();
}

Status LayerWriter::Entry(LayerTarReader& reader, archive_entry* e) {
  const char* raw = archive_entry_pathname(e);
  std::string raw_path = raw ? raw : "";
  std::optional<std::string> cleaned = CleanLayerPath(raw_path);
  if (!cleaned) return Invalid("entry " + raw_path + " leaves the layer's root", raw_path);
  const std::string& path = *cleaned;
  for (const std::string& prefix : options_.skip_prefixes) {
    if (HasPathPrefix(path, prefix)) {
      skipped_.insert(path);
      return Status::Ok();
    }
  }
  LayerNode node = NodeOfEntry(e);
  if (path.empty()) {  // the root itself: only its metadata
    if (node.type != AE_IFDIR)
      return Invalid("the layer's root entry is not a directory", raw_path);
    dirs_[""] = DirFinish{std::nullopt, {node.mtime, node.mtime}};
    return SetMetadata(node, e, -1, "", root_, ".");
  }
  auto [dir, name] = SplitPath(path);
  auto parent_or = OpenDir(dir, true, path);
  if (!parent_or.ok()) return parent_or.status();
  int parent = parent_or->get();

  if (archive_entry_hardlink(e)) return HardLink(e, parent, name, path);

  switch (node.type) {
    case AE_IFREG: {
      auto data = [&](int fd) { return WriteFile(reader, e, fd, path); };
      if (Status s = Place(parent, name, path, node, e, data); !s.ok()) return s;
      ++(name.rfind(".wh.", 0) == 0 ? stats_.whiteouts : stats_.files);
      return Status::Ok();
    }
    case AE_IFDIR: {
      node.atime = node.mtime;  // what FinishDirs gives a directory of a tar
      Result<UniqueFd> fd = PlaceDir(parent, name, path, node, e, false);
      if (!fd.ok()) return fd.status();
      const char* key;
      const void* value;
      size_t size;
      bool opaque = false;  // libarchive may report it twice (SCHILY. and LIBARCHIVE.)
      archive_entry_xattr_reset(e);
      while (archive_entry_xattr_next(e, &key, &value, &size) == ARCHIVE_OK)
        opaque |= std::string_view(key) == "trusted.overlay.opaque" && size >= 1 &&
                  static_cast<const char*>(value)[0] == 'y';
      if (!opaque) return Status::Ok();
      UniqueFd marker(::openat(fd->get(), kOpaqueWhiteout,
                               O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
      if (!marker) return FsError("create opaque marker in", path, errno);
      ++stats_.whiteouts;
      return Status::Ok();
    }
    case AE_IFLNK:
    case AE_IFIFO:
      return Place(parent, name, path, node, e, nullptr);
    case AE_IFCHR:
      if (archive_entry_rdevmajor(e) == 0 && archive_entry_rdevminor(e) == 0) {
        whiteout_devices_.insert(path);
        return MakeWhiteout(parent, name, path);
      }
      [[fallthrough]];
    case AE_IFBLK:
      skipped_.insert(path);
      ++stats_.devices_skipped;
      return Status::Ok();
    default:
      return Invalid("entry " + path + " has an unsupported type", path);
  }
}

Status LayerWriter::FinishDirs() {
  std::map<std::string, DirFinish> dirs = std::move(dirs_);
  dirs_.clear();
  // A path sorts before every path under it: backwards, each directory
  // comes after what it holds, which a mode without search permission
  // would close to the walk.
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    const auto& [path, finish] = *it;
    // A later entry may have replaced the directory; then its metadata is moot.
    auto fd = OpenDir(path, false, path);
    if (!fd.ok()) continue;
    if (finish.mode && ::fchmod(fd->get(), *finish.mode) != 0) return FsError("chmod", path, errno);
    if (::futimens(fd->get(), finish.times) != 0) return FsError("utimensat", path, errno);
  }
  return Status::Ok();
}

}  // namespace kiln::images
