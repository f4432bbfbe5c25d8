#include "images/layers/flatten.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "common/unique_fd.h"
#include "images/layers/fs_tree.h"

namespace kiln::images {
namespace {

std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

// Opens `rel` ("" for the root itself) under `root`, never following a symlink.
UniqueFd OpenRel(int root, const std::string& rel) {
  UniqueFd cur(::fcntl(root, F_DUPFD_CLOEXEC, 0));
  size_t start = 0;
  while (cur && start < rel.size()) {
    size_t end = rel.find('/', start);
    if (end == std::string::npos) end = rel.size();
    cur = OpenDirAt(cur.get(), rel.substr(start, end - start));
    start = end + 1;
  }
  return cur;
}

Status CopyXattrs(int from, int to, const std::string& path) {
  ssize_t len = ::flistxattr(from, nullptr, 0);
  if (len <= 0) return Status::Ok();
  std::string names(static_cast<size_t>(len), '\0');
  len = ::flistxattr(from, names.data(), names.size());
  if (len < 0) return FsError("listxattr", path, errno);
  names.resize(static_cast<size_t>(len));
  for (size_t at = 0; at < names.size(); at += std::strlen(names.c_str() + at) + 1) {
    const char* name = names.c_str() + at;
    if (std::string_view(name).rfind("trusted.overlay.", 0) == 0) continue;
    ssize_t size = ::fgetxattr(from, name, nullptr, 0);
    if (size < 0) continue;  // gone, or not readable without root
    std::string value(static_cast<size_t>(size), '\0');
    size = ::fgetxattr(from, name, value.data(), value.size());
    if (size < 0) continue;
    if (::fsetxattr(to, name, value.data(), static_cast<size_t>(size), 0) != 0 &&
        errno != ENOTSUP && !(errno == EPERM && ::geteuid() != 0))
      return FsError(std::string("setxattr ") + name + " on", path, errno);
  }
  return Status::Ok();
}

// Owner, mode, xattrs and times of `from` onto `to` (both open), in the order
// that keeps setuid bits and file capabilities (chown clears both).
Status CopyMetadata(int from, const struct stat& st, int to, const std::string& path) {
  if (::geteuid() == 0 && ::fchown(to, st.st_uid, st.st_gid) != 0)
    return FsError("chown", path, errno);
  if (::fchmod(to, st.st_mode & 07777) != 0) return FsError("chmod", path, errno);
  if (Status s = CopyXattrs(from, to, path); !s.ok()) return s;
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (::futimens(to, times) != 0) return FsError("utimensat", path, errno);
  return Status::Ok();
}

class Flattener {
 public:
  explicit Flattener(int dest) : dest_(dest) {}

  Status Layer(size_t index, int layer_root) {
    layer_roots_.push_back(layer_root);
    dir_owner_[""] = index;
    return Merge(index, layer_root, dest_, "");
  }
  Status ApplyDirMetadata();
  FlattenStats stats;

 private:
  Status Merge(size_t index, int from, int to, const std::string& rel);
  Status Place(size_t index, int from, int to, const std::string& name, const std::string& path);
  Status Copy(int from, int to, const std::string& name, const struct stat& st,
              const std::string& path);

  int dest_;
  std::vector<int> layer_roots_;
  // Each directory's topmost layer, whose metadata it gets once all is placed
  // (placing entries would change its mtime again).
  std::map<std::string, size_t> dir_owner_;
};

Status Flattener::Merge(size_t index, int from, int to, const std::string& rel) {
  auto names = ListDir(from);
  if (!names.ok()) return names.status();
  // Deletions first: they apply to lower layers only, never to this one's entries.
  for (const std::string& name : *names) {
    if (name == kOpaqueWhiteout) {
      if (Status s = ClearDir(to); !s.ok()) return s;
      ++stats.whiteouts_applied;
    }
  }
  for (const std::string& name : *names) {
    if (name.rfind(".wh.", 0) != 0 || name == kOpaqueWhiteout) continue;
    std::string target = name.substr(4);
    if (target.empty() || target == "." || target == "..")
      return Status(Code::kInvalidImage, "whiteout " + Join(rel, name) + " names no entry",
                    {{"path", Join(rel, name)}});
    struct stat st;
    if (::fstatat(to, target.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (Status s = RemoveTreeAt(to, target); !s.ok()) return s;
    ++stats.whiteouts_applied;
  }
  for (const std::string& name : *names) {
    if (name.rfind(".wh.", 0) == 0) continue;
    if (Status s = Place(index, from, to, name, Join(rel, name)); !s.ok()) return s;
  }
  return Status::Ok();
}

Status Flattener::Place(size_t index, int from, int to, const std::string& name,
                        const std::string& path) {
  struct stat st, old;
  if (::fstatat(from, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return FsError("stat layer entry", path, errno);
  bool exists = ::fstatat(to, name.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0;
  if (exists && !(S_ISDIR(st.st_mode) && S_ISDIR(old.st_mode))) {
    if (Status s = RemoveTreeAt(to, name); !s.ok()) return s;
    exists = false;
  }
  if (S_ISDIR(st.st_mode)) {
    if (!exists) {
      if (::mkdirat(to, name.c_str(), 0700) != 0) return FsError("mkdir", path, errno);
      ++stats.dirs;
    }
    UniqueFd sub_from = OpenDirAt(from, name);
    if (!sub_from) return FsError("open layer dir", path, errno);
    UniqueFd sub_to = OpenDirAt(to, name);
    if (!sub_to) return FsError("open", path, errno);
    dir_owner_[path] = index;
    return Merge(index, sub_from.get(), sub_to.get(), path);
  }
  if (S_ISREG(st.st_mode)) {
    if (::linkat(from, name.c_str(), to, name.c_str(), 0) == 0) {
      ++stats.linked;
      return Status::Ok();
    }
    if (errno != EMLINK && errno != EXDEV) return FsError("link", path, errno);
    return Copy(from, to, name, st, path);
  }
  if (S_ISLNK(st.st_mode) || S_ISFIFO(st.st_mode)) {
    if (S_ISLNK(st.st_mode)) {
      std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
      ssize_t n = ::readlinkat(from, name.c_str(), target.data(), target.size());
      if (n < 0) return FsError("readlink", path, errno);
      target.resize(static_cast<size_t>(n));
      if (::symlinkat(target.c_str(), to, name.c_str()) != 0)
        return FsError("symlink", path, errno);
    } else {
      if (::mkfifoat(to, name.c_str(), 0600) != 0) return FsError("mkfifo", path, errno);
      if (::fchmodat(to, name.c_str(), st.st_mode & 07777, 0) != 0)
        return FsError("chmod", path, errno);
    }
    if (::geteuid() == 0 &&
        ::fchownat(to, name.c_str(), st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) != 0)
      return FsError("chown", path, errno);
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    if (::utimensat(to, name.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
      return FsError("utimensat", path, errno);
    return Status::Ok();
  }
  return Status::Ok();  // devices and sockets: not in layers kiln unpacks
}

Status Flattener::Copy(int from, int to, const std::string& name, const struct stat& st,
                       const std::string& path) {
  UniqueFd in(::openat(from, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!in) return FsError("open layer file", path, errno);
  UniqueFd out(
      ::openat(to, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) return FsError("create", path, errno);
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(in.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FsError("read layer file", path, errno);
    if (n == 0) break;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(out.get(), buf + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return FsError("write", path, errno);
      done += w;
    }
  }
  ++stats.copied;
  return CopyMetadata(in.get(), st, out.get(), path);
}

Status Flattener::ApplyDirMetadata() {
  for (const auto& [path, index] : dir_owner_) {
    // Removed by a later whiteout or replaced by a file: nothing to do.
    UniqueFd to = OpenRel(dest_, path);
    if (!to) continue;
    UniqueFd from = OpenRel(layer_roots_[index], path);
    if (!from) return FsError("open layer dir", path, errno);
    struct stat st;
    if (::fstat(from.get(), &st) != 0) return FsError("stat layer dir", path, errno);
    if (Status s = CopyMetadata(from.get(), st, to.get(), path.empty() ? "." : path); !s.ok())
      return s;
  }
  return Status::Ok();
}

void AddUsage(int dir, std::set<std::pair<dev_t, ino_t>>* seen, uint64_t* total) {
  auto names = ListDir(dir);
  if (!names.ok()) return;
  for (const std::string& name : *names) {
    struct stat st;
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      if (seen->insert({st.st_dev, st.st_ino}).second)
        *total += static_cast<uint64_t>(st.st_blocks) * 512;
    } else if (S_ISDIR(st.st_mode)) {
      UniqueFd sub = OpenDirAt(dir, name);
      if (sub) AddUsage(sub.get(), seen, total);
    }
  }
}

}  // namespace

Result<FlattenStats> Flatten(const std::vector<std::string>& layer_dirs, const std::string& dest) {
  std::error_code ec;
  std::filesystem::path dest_path(dest);
  if (dest_path.has_parent_path()) std::filesystem::create_directories(dest_path.parent_path(), ec);
  if (::mkdir(dest.c_str(), 0755) != 0) {
    if (errno == EEXIST)
      return Status(Code::kFileExists, "image root " + dest + " already exists", {{"path", dest}});
    return ErrnoStatus(Code::kIoError, "mkdir " + dest, errno, dest);
  }
  Result<FlattenStats> result = [&]() -> Result<FlattenStats> {
    UniqueFd root(::open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!root) return ErrnoStatus(Code::kIoError, "open " + dest, errno, dest);
    Flattener flattener(root.get());
    std::vector<UniqueFd> layers;
    for (size_t i = 0; i < layer_dirs.size(); ++i) {
      layers.emplace_back(::open(layer_dirs[i].c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (!layers.back())
        return ErrnoStatus(errno == ENOENT ? Code::kNotFound : Code::kIoError,
                           "open layer " + layer_dirs[i], errno, layer_dirs[i]);
      if (Status s = flattener.Layer(i, layers.back().get()); !s.ok()) return s;
    }
    if (Status s = flattener.ApplyDirMetadata(); !s.ok()) return s;
    return flattener.stats;
  }();
  if (!result.ok()) (void)RemoveTreeAt(AT_FDCWD, dest);
  return result;
}

Status RemoveTree(const std::string& path, uint64_t* freed) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (p.empty() || p == "/")
    return Status(Code::kInvalidRequest, "refusing to remove \"" + path + "\"", {{"path", path}});
  return RemoveTreeAt(AT_FDCWD, p, freed);
}

uint64_t SharedDiskUsage(const std::vector<std::string>& dirs) {
  std::set<std::pair<dev_t, ino_t>> seen;
  uint64_t total = 0;
  for (const std::string& dir : dirs) {
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd) AddUsage(fd.get(), &seen, &total);
  }
  return total;
}

uint64_t DiskUsage(const std::string& dir) { return SharedDiskUsage({dir}); }

}  // namespace kiln::images
