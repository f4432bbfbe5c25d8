#include "images/context/copy_step.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>

#include "common/digest.h"
#include "common/unique_fd.h"
#include "images/context/safe_path.h"
#include "images/context/tar_extract.h"
#include "images/layers/layer_writer.h"

namespace kiln::images {
namespace {

constexpr int kMaxDepth = 256;  // one fd a level while walking
constexpr int kMaxLinks = 40;   // as the kernel's MAXSYMLINKS

std::string Join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "/" + b;
}

// "a/b/c" -> {"a/b", "c"}; "c" -> {"", "c"}.
std::pair<std::string, std::string> SplitLast(const std::string& rel) {
  size_t slash = rel.rfind('/');
  if (slash == std::string::npos) return {"", rel};
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

bool HasMeta(std::string_view s) { return s.find_first_of("*?[") != std::string_view::npos; }

// Names in a directory, sorted, without "." and "..".
Result<std::vector<std::string>> ListDir(int dir_fd, const std::string& path) {
  int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return FsError("list", path, errno);
  struct CloseDir {
    void operator()(DIR* d) const { ::closedir(d); }
  };
  std::unique_ptr<DIR, CloseDir> d(::fdopendir(fd));
  if (!d) {
    ::close(fd);
    return FsError("list", path, errno);
  }
  std::vector<std::string> names;
  while (dirent* de = ::readdir(d.get())) {
    std::string name = de->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

// lstat of `rel` inside `root`, intermediate symlinks resolved inside it.
bool LstatInRoot(const std::string& root, const std::string& rel, struct stat* st) {
  if (root.empty()) return false;
  auto [dir, name] = SplitLast(CleanPath(rel).substr(1));
  Result<UniqueFd> fd = OpenInRoot(root, dir, O_PATH | O_DIRECTORY);
  if (!fd.ok()) return false;
  if (name.empty()) return ::fstat(fd->get(), st) == 0;
  return ::fstatat(fd->get(), name.c_str(), st, AT_SYMLINK_NOFOLLOW) == 0;
}

// Where each source's matches are, as clean paths relative to source_root
// ("" is the root itself), sorted within a source.
Result<std::vector<std::string>> Expand(const CopySpec& spec) {
  std::vector<std::string> all;
  for (const std::string& source : spec.sources) {
    if (EscapesRoot(source)) {
      return Status(Code::kInvalidRequest,
                    "COPY source " + source + " is outside the build context",
                    {{"source", source}});
    }
    std::string clean = CleanPath(source).substr(1);
    std::vector<std::string> candidates;
    if (!HasMeta(clean)) {
      candidates.push_back(clean);
    } else {
      if (!ValidGlob(clean)) {
        return Status(Code::kInvalidRequest, "COPY source " + source + ": bad pattern",
                      {{"source", source}});
      }
      candidates.push_back("");
      for (const std::string& part : PathParts(clean)) {
        std::vector<std::string> next;
        for (const std::string& dir : candidates) {
          if (!HasMeta(part)) {
            next.push_back(Join(dir, part));
            continue;
          }
          Result<UniqueFd> fd = OpenInRoot(spec.source_root, dir, O_RDONLY | O_DIRECTORY);
          if (!fd.ok()) continue;  // not a directory: nothing under it matches
          Result<std::vector<std::string>> names = ListDir(fd->get(), dir);
          if (!names.ok()) return names.status();
          for (const std::string& name : *names) {
            if (GlobMatch(part, name)) next.push_back(Join(dir, name));
          }
        }
        candidates = std::move(next);
      }
    }
    size_t before = all.size();
    for (std::string& rel : candidates) {
      struct stat st;
      if (!LstatInRoot(spec.source_root, rel, &st)) continue;
      if (spec.ignore && !rel.empty() && spec.ignore->Excluded(rel)) continue;
      all.push_back(std::move(rel));
    }
    if (all.size() == before) {
      return Status(
          Code::kFileNotFound,
          "COPY source " + source + " not found in " +
              (spec.ignore ? "the build context (or excluded by .dockerignore)" : "the source"),
          {{"source", source}});
    }
  }
  return all;
}

// Pre-order walk of one match, never following a symlink. For a directory:
// dir(rel, st, fd) ... leave(); for a file: file(rel, st, fd); for a
// symlink: link(rel, st, target). `rel` is relative to the match ("" for the
// match itself). Devices, fifos and sockets are skipped.
struct Visitor {
  std::function<Status(const std::string&, const struct stat&, int)> dir;
  std::function<Status()> leave;
  std::function<Status(const std::string&, const struct stat&, int)> file;
  std::function<Status(const std::string&, const struct stat&, const std::string&)> link;
};

class Walker {
 public:
  Walker(const CopySpec& spec, const Visitor& v) : spec_(spec), v_(v) {}

  Status Match(const std::string& match) {
    auto [dir, name] = SplitLast(match);
    if (match.empty()) {
      Result<UniqueFd> root = OpenInRoot(spec_.source_root, "/", O_RDONLY | O_DIRECTORY);
      if (!root.ok()) return root.status();
      struct stat st;
      if (::fstat(root->get(), &st) != 0) return FsError("stat", spec_.source_root, errno);
      return Dir(root->get(), match, "", st, 0);
    }
    Result<UniqueFd> parent = OpenInRoot(spec_.source_root, dir, O_RDONLY | O_DIRECTORY);
    if (!parent.ok()) return parent.status();
    return Node(parent->get(), name, match, "", 0);
  }

 private:
  Status Node(int parent, const std::string& name, const std::string& ctx_rel,
              const std::string& rel, int depth) {
    struct stat st;
    if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return FsError("stat", ctx_rel, errno);
    }
    if (S_ISLNK(st.st_mode)) {
      std::vector<char> buf(4097);
      ssize_t n = ::readlinkat(parent, name.c_str(), buf.data(), buf.size());
      if (n < 0) return FsError("readlink", ctx_rel, errno);
      return v_.link(rel, st, std::string(buf.data(), static_cast<size_t>(n)));
    }
    if (S_ISREG(st.st_mode)) {
      UniqueFd fd(::openat(parent, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) return FsError("open", ctx_rel, errno);
      return v_.file(rel, st, fd.get());
    }
    if (!S_ISDIR(st.st_mode)) return Status::Ok();
    UniqueFd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) return FsError("open", ctx_rel, errno);
    return Dir(fd.get(), ctx_rel, rel, st, depth);
  }

  Status Dir(int fd, const std::string& ctx_rel, const std::string& rel, const struct stat& st,
             int depth) {
    if (depth > kMaxDepth) {
      return Status(Code::kInvalidRequest, "COPY source " + ctx_rel + " is nested too deeply",
                    {{"path", ctx_rel}});
    }
    if (Status s = v_.dir(rel, st, fd); !s.ok()) return s;
    Result<std::vector<std::string>> names = ListDir(fd, ctx_rel);
    if (!names.ok()) return names.status();
    for (const std::string& name : *names) {
      std::string child = Join(ctx_rel, name);
      if (spec_.ignore && spec_.ignore->Excluded(child)) {
        struct stat cst;
        bool dir =
            ::fstatat(fd, name.c_str(), &cst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(cst.st_mode);
        // An excluded directory may still hold a "!" re-included file.
        if (!dir || !spec_.ignore->HasExceptions()) continue;
      }
      if (Status s = Node(fd, name, child, Join(rel, name), depth + 1); !s.ok()) return s;
    }
    return v_.leave();
  }

  const CopySpec& spec_;
  const Visitor& v_;
};

Result<std::string> FdSha256(int fd, const std::string& path) {
  Sha256 hash;
  std::vector<char> buf(1 << 20);
  ssize_t n;
  while ((n = ::read(fd, buf.data(), buf.size())) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      return FsError("read", path, errno);
    }
    hash.Update(buf.data(), static_cast<size_t>(n));
  }
  return hash.HexDigest();
}

// ---- Writing into the layer ----

struct Owner {
  uint32_t uid = 0, gid = 0;
};

// One COPY's matches written into its layer by the layers library's writer
// (images/layers/layer_writer.h), with Docker's owners and modes.
class Copier {
 public:
  Copier(const CopySpec& spec, const std::string& parent_root, int layer_fd)
      : spec_(spec), parent_root_(parent_root), writer_(no_unpack_options_, layer_fd) {
    if (spec.chown) owner_ = {spec.chown->first, spec.chown->second};
  }

  // Opens the in-image directory `path` in the layer, creating what is
  // missing: as in parent_root where it exists there, else 0755 and the
  // COPY's owner.
  Result<UniqueFd> EnsureDir(const std::string& path) {
    LayerWriter::DirWalk walk;
    walk.made = [this](const std::string& rel) {
      const std::string in_image = "/" + rel;
      LayerNode node;
      node.type = S_IFDIR;
      struct stat pst;
      if (LstatInRoot(parent_root_, in_image, &pst) && S_ISDIR(pst.st_mode)) {
        node.uid = pst.st_uid;
        node.gid = pst.st_gid;
        node.mode = pst.st_mode & 07777;
        node.mtime = pst.st_mtim;
      } else {
        node.uid = owner_.uid;
        node.gid = owner_.gid;
        node.mode = 0755;
      }
      return node;
    };
    walk.blocked = [](const std::string& rel) {
      const std::string in_image = "/" + rel;
      return Status(Code::kInvalidRequest,
                    "COPY destination " + in_image + " is not a directory in this step",
                    {{"path", in_image}});
    };
    return writer_.OpenDir(CleanPath(path).substr(1), true, path, walk);
  }

  // Writes one match's tree: its root goes to `name` in `dir_fd`, or, for a
  // directory match copied by contents, into `dir_fd` itself (name empty).
  // The match's directories get their modes and mtimes once it is written.
  Status Copy(const std::string& match, int dir_fd, const std::string& name,
              const std::string& dest_path) {
    std::vector<UniqueFd> stack;  // the directories being written into, innermost last
    Visitor v;
    auto target = [&](const std::string& rel, int* parent, std::string* leaf, std::string* path) {
      if (rel.empty()) {
        *parent = dir_fd;
        *leaf = name;
        *path = dest_path;
      } else {
        *parent = stack.back().get();
        *leaf = SplitLast(rel).second;
        *path = Join(dest_path, rel);
      }
    };
    v.dir = [&](const std::string& rel, const struct stat& st, int) -> Status {
      if (rel.empty() && name.empty()) {  // contents into dest itself
        stack.emplace_back(::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0));
        return Status::Ok();
      }
      int parent;
      std::string leaf, path;
      target(rel, &parent, &leaf, &path);
      Result<UniqueFd> fd = writer_.Put(parent, leaf, path, NodeOf(S_IFDIR, st));
      if (!fd.ok()) return fd.status();
      stack.push_back(std::move(*fd));
      return Status::Ok();
    };
    v.leave = [&]() -> Status {
      stack.pop_back();
      return Status::Ok();
    };
    v.file = [&](const std::string& rel, const struct stat& st, int in) -> Status {
      int parent;
      std::string leaf, path;
      target(rel, &parent, &leaf, &path);
      if (spec_.add && rel.empty() && internal::IsTarArchive(in)) return Extract(in, path);
      auto data = [&](int out) { return CopyData(in, out, path); };
      Result<UniqueFd> done = writer_.Put(parent, leaf, path, NodeOf(S_IFREG, st), data);
      if (!done.ok()) return done.status();
      ++stats_.files;
      return Status::Ok();
    };
    v.link = [&](const std::string& rel, const struct stat& st, const std::string& to) -> Status {
      int parent;
      std::string leaf, path;
      target(rel, &parent, &leaf, &path);
      LayerNode node = NodeOf(S_IFLNK, st);
      node.link_target = to;
      Result<UniqueFd> done = writer_.Put(parent, leaf, path, node);
      if (!done.ok()) return done.status();
      ++stats_.files;
      return Status::Ok();
    };
    if (Status s = Walker(spec_, v).Match(match); !s.ok()) return s;
    return writer_.FinishDirs();
  }

  CopyStats stats() const { return stats_; }

  // ADD: the archive is unpacked at the destination, a directory.
  void SetArchiveDest(std::string dir) { archive_dest_ = std::move(dir); }

 private:
  // What COPY makes of a source entry: the COPY's owner (root without
  // --chown), the source's mode unless --chmod (a symlink has none), its mtime.
  LayerNode NodeOf(mode_t type, const struct stat& st) const {
    LayerNode node;
    node.type = type;
    node.uid = owner_.uid;
    node.gid = owner_.gid;
    node.mode = spec_.chmod ? *spec_.chmod & 07777 : st.st_mode & 07777;
    node.mtime = st.st_mtim;
    return node;
  }

  Status Extract(int tar_fd, const std::string& path) {
    Result<UniqueFd> dir = EnsureDir(archive_dest_.empty() ? path : archive_dest_);
    if (!dir.ok()) return dir.status();
    internal::ExtractOptions options;
    // What is left of the step's budget, across all of its archives.
    auto left = [](uint64_t max, uint64_t used) { return max > used ? max - used : 0; };
    options.limits = {UINT64_MAX, left(spec_.max_unpacked_files, stats_.files),
                      left(spec_.max_unpacked_bytes, stats_.bytes)};
    options.strip_absolute = true;
    options.skip_special = true;
    options.keep_owners = true;
    options.chown = spec_.chown;
    Result<ContextStats> s = internal::ExtractTar(tar_fd, dir->get(), options);
    if (!s.ok()) return s.status();
    stats_.files += s->files;
    stats_.bytes += s->bytes;
    return Status::Ok();
  }

  Status CopyData(int in, int out, const std::string& path) {
    for (;;) {
      ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, 1 << 30, 0);
      if (n == 0) return Status::Ok();
      if (n > 0) {
        stats_.bytes += static_cast<uint64_t>(n);
        continue;
      }
      if (errno == EINTR) continue;
      if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) {
        return FsError("copy to", path, errno);
      }
      break;  // copy by hand from where copy_file_range stopped
    }
    std::vector<char> buf(1 << 20);
    for (;;) {
      ssize_t n = ::read(in, buf.data(), buf.size());
      if (n == 0) return Status::Ok();
      if (n < 0) {
        if (errno == EINTR) continue;
        return FsError("read for", path, errno);
      }
      for (ssize_t off = 0; off < n;) {
        ssize_t w = ::write(out, buf.data() + off, static_cast<size_t>(n - off));
        if (w < 0) {
          if (errno == EINTR) continue;
          return FsError("write", path, errno);
        }
        off += w;
      }
      stats_.bytes += static_cast<uint64_t>(n);
    }
  }

  const CopySpec& spec_;
  const std::string& parent_root_;
  const UnpackOptions no_unpack_options_{};  // the writer's; Put reads none of them
  LayerWriter writer_;
  Owner owner_;
  CopyStats stats_;
  std::string archive_dest_;
};

// `dest` with the symlinks of parent_root resolved inside it, as the
// container would see the path: "/bin/x" is "/usr/bin/x" when /bin ->
// usr/bin. The last component is followed only if `follow_last`.
Result<std::string> ResolveDest(const std::string& parent_root, const std::string& dest,
                                bool follow_last) {
  std::vector<std::string> todo = PathParts(dest);
  std::reverse(todo.begin(), todo.end());  // a stack: back() is next
  std::vector<std::string> done;
  int links = 0;
  bool missing = parent_root.empty();
  while (!todo.empty()) {
    std::string part = std::move(todo.back());
    todo.pop_back();
    if (part == "..") {
      if (!done.empty()) done.pop_back();
      continue;
    }
    std::string dir;
    for (const std::string& d : done) dir += "/" + d;
    if (!missing && (follow_last || !todo.empty())) {
      Result<UniqueFd> fd = OpenInRoot(parent_root, dir, O_PATH | O_DIRECTORY);
      struct stat st;
      if (fd.ok() && ::fstatat(fd->get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(st.st_mode)) {
          if (++links > kMaxLinks) {
            return Status(Code::kInvalidRequest,
                          "COPY destination " + dest + ": too many symlinks in the image",
                          {{"path", dest}});
          }
          std::vector<char> buf(4097);
          ssize_t n = ::readlinkat(fd->get(), part.c_str(), buf.data(), buf.size());
          if (n < 0) return FsError("readlink", dir + "/" + part, errno);
          std::string target(buf.data(), static_cast<size_t>(n));
          if (!target.empty() && target.front() == '/') done.clear();
          std::vector<std::string> more;
          size_t i = 0;
          while (i <= target.size()) {
            size_t j = target.find('/', i);
            if (j == std::string::npos) j = target.size();
            if (j > i && target.compare(i, j - i, ".") != 0)
              more.push_back(target.substr(i, j - i));
            i = j + 1;
          }
          for (auto it = more.rbegin(); it != more.rend(); ++it) todo.push_back(*it);
          continue;
        }
      } else {
        missing = true;  // nothing below a missing name can be a link
      }
    }
    done.push_back(std::move(part));
  }
  std::string out;
  for (const std::string& d : done) out += "/" + d;
  return out.empty() ? "/" : out;
}

}  // namespace

Result<std::string> CopySourcesDigest(const CopySpec& spec) {
  Result<std::vector<std::string>> matches = Expand(spec);
  if (!matches.ok()) return matches.status();
  Sha256 hash;
  auto add = [&](const std::string& record) { hash.Update(record); };
  auto entry = [&](const std::string& rel, char type, const struct stat& st,
                   const std::string& payload) {
    char mode[16];
    std::snprintf(mode, sizeof(mode), "%o", static_cast<unsigned>(st.st_mode & 07777));
    std::string size = type == 'f' ? std::to_string(st.st_size) : "0";
    add(rel + '\0' + type + '\0' + mode + '\0' + size + '\0' + payload + '\n');
  };
  Visitor v;
  v.dir = [&](const std::string& rel, const struct stat& st, int) -> Status {
    entry(rel, 'd', st, "");
    return Status::Ok();
  };
  v.leave = []() { return Status::Ok(); };
  v.file = [&](const std::string& rel, const struct stat& st, int fd) -> Status {
    Result<std::string> sha = FdSha256(fd, rel);
    if (!sha.ok()) return sha.status();
    entry(rel, 'f', st, *sha);
    return Status::Ok();
  };
  v.link = [&](const std::string& rel, const struct stat& st, const std::string& to) -> Status {
    entry(rel, 'l', st, to);
    return Status::Ok();
  };
  Walker walker(spec, v);
  for (const std::string& match : *matches) {
    add(std::string("match\0", 6) + match + '\n');
    if (Status s = walker.Match(match); !s.ok()) return s;
  }
  return hash.HexDigest();
}

Result<CopyStats> ApplyCopy(const CopySpec& spec, const std::string& parent_root,
                            const std::string& layer_dir) {
  Result<std::vector<std::string>> matches = Expand(spec);
  if (!matches.ok()) return matches.status();
  if (spec.dest.empty() || spec.dest.front() != '/') {
    return Status(Code::kInvalidRequest, "COPY destination " + spec.dest + " is not absolute",
                  {{"path", spec.dest}});
  }
  if (::mkdir(layer_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return FsError("create layer dir", layer_dir, errno);
  }
  UniqueFd layer(::open(layer_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!layer) return FsError("open layer dir", layer_dir, errno);

  // Docker's rules for "dest is a directory".
  Result<std::string> followed = ResolveDest(parent_root, spec.dest, true);
  if (!followed.ok()) return followed.status();
  struct stat st;
  bool in_parent_dir = false;
  if (!parent_root.empty()) {
    in_parent_dir = OpenInRoot(parent_root, spec.dest, O_PATH | O_DIRECTORY).ok();
  }
  std::string in_layer = CleanPath(*followed).substr(1);
  bool in_layer_dir = in_layer.empty() ||
                      (::fstatat(layer.get(), in_layer.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                       S_ISDIR(st.st_mode));
  bool dest_is_dir = spec.sources.size() > 1 || matches->size() > 1 || spec.dest.back() == '/' ||
                     in_parent_dir || in_layer_dir;
  std::string dest;
  if (dest_is_dir) {
    dest = *followed;
  } else {
    // A file replaces a final symlink rather than writing through it.
    Result<std::string> unfollowed = ResolveDest(parent_root, spec.dest, false);
    if (!unfollowed.ok()) return unfollowed.status();
    dest = *unfollowed;
  }

  Copier writer(spec, parent_root, layer.get());
  if (spec.add) writer.SetArchiveDest(dest);
  for (const std::string& match : *matches) {
    struct stat mst;
    if (!LstatInRoot(spec.source_root, match, &mst)) {
      return Status(Code::kFileNotFound, "COPY source " + match + " vanished", {{"source", match}});
    }
    if (S_ISDIR(mst.st_mode)) {
      Result<UniqueFd> dir = writer.EnsureDir(dest);
      if (!dir.ok()) return dir.status();
      if (Status s = writer.Copy(match, dir->get(), "", dest); !s.ok()) return s;
      continue;
    }
    std::string dir_path, leaf;
    if (dest_is_dir) {
      dir_path = dest;
      leaf = SplitLast(match).second;
    } else {
      std::tie(dir_path, leaf) = SplitLast(dest.substr(1));
      dir_path = "/" + dir_path;
    }
    Result<UniqueFd> dir = writer.EnsureDir(dir_path);
    if (!dir.ok()) return dir.status();
    if (Status s =
            writer.Copy(match, dir->get(), leaf, Join(dir_path == "/" ? "" : dir_path, leaf));
        !s.ok()) {
      return s;
    }
  }
  return writer.stats();
}

}  // namespace kiln::images
