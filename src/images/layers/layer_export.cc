#include "images/layers/layer_export.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "common/digest.h"
#include "common/unique_fd.h"

namespace kiln::images {

namespace {

constexpr size_t kChunk = 1 << 20;

struct ArchiveDeleter {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct EntryDeleter {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

// Names in `dir`, sorted (readdir's order is the file system's, not fixed).
Result<std::vector<std::string>> SortedNames(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return FsError("list", dir, errno);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d.get())) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The xattrs of `path` (not followed), sorted by name.
Status AddXattrs(const std::string& path, archive_entry* e) {
  ssize_t n = ::llistxattr(path.c_str(), nullptr, 0);
  if (n <= 0) return Status::Ok();  // none, or a file system without them
  std::string list(static_cast<size_t>(n), '\0');
  n = ::llistxattr(path.c_str(), list.data(), list.size());
  if (n < 0) return FsError("list the xattrs of", path, errno);
  list.resize(static_cast<size_t>(n));
  std::vector<std::string> keys;
  for (size_t at = 0; at < list.size();) {
    size_t end = list.find('\0', at);
    if (end == std::string::npos) end = list.size();
    if (end > at) keys.push_back(list.substr(at, end - at));
    at = end + 1;
  }
  std::sort(keys.begin(), keys.end());
  for (const auto& key : keys) {
    ssize_t size = ::lgetxattr(path.c_str(), key.c_str(), nullptr, 0);
    if (size < 0) return FsError("read xattr " + key + " of", path, errno);
    std::string value(static_cast<size_t>(size), '\0');
    size = ::lgetxattr(path.c_str(), key.c_str(), value.data(), value.size());
    if (size < 0) return FsError("read xattr " + key + " of", path, errno);
    archive_entry_xattr_add_entry(e, key.c_str(), value.data(), static_cast<size_t>(size));
  }
  return Status::Ok();
}

class TarWriter {
 public:
  explicit TarWriter(const std::function<bool(std::string_view)>& write) : write_(write) {}

  Status Run(const std::string& dir) {
    a_.reset(archive_write_new());
    if (!a_ || archive_write_set_format_pax_restricted(a_.get()) != ARCHIVE_OK ||
        archive_write_set_bytes_per_block(a_.get(), 0) != ARCHIVE_OK ||
        archive_write_open(a_.get(), this, nullptr, &TarWriter::Write, nullptr) != ARCHIVE_OK)
      return ArchiveError("start the tar of", dir);
    root_ = dir;
    if (Status s = Add("", true); !s.ok()) return s;
    if (archive_write_close(a_.get()) != ARCHIVE_OK) return ArchiveError("finish the tar of", dir);
    return cancelled_ ? Gone() : Status::Ok();
  }

 private:
  // Never fails the archive: libarchive in its fatal state leaks the
  // format's state on free. A receiver gone is noted (and what follows
  // dropped); the writer checks Gone() after each step and stops.
  static la_ssize_t Write(archive*, void* self, const void* buf, size_t len) {
    auto* w = static_cast<TarWriter*>(self);
    if (!w->cancelled_ && !w->write_(std::string_view(static_cast<const char*>(buf), len)))
      w->cancelled_ = true;
    return static_cast<la_ssize_t>(len);
  }

  Status Gone() const { return Status(Code::kIoError, "layer export: the receiver went away"); }

  Status ArchiveError(const std::string& what, const std::string& path) {
    if (cancelled_) return Gone();
    const char* msg = a_ ? archive_error_string(a_.get()) : nullptr;
    return Status(Code::kIoError,
                  "layer export: cannot " + what + " " + path + ": " + (msg ? msg : "libarchive"));
  }

  // Writes `rel` ("" = the layer's root) and, for a directory, what it holds.
  Status Add(const std::string& rel, bool is_root) {
    std::string path = rel.empty() ? root_ : root_ + "/" + rel;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return FsError("stat", path, errno);
    int type = st.st_mode & S_IFMT;
    if (type != S_IFDIR && type != S_IFREG && type != S_IFLNK && type != S_IFIFO)
      return Status::Ok();  // a layer holds no devices or sockets (layer_unpack.h)
    std::unique_ptr<archive_entry, EntryDeleter> e(archive_entry_new());
    archive_entry_set_pathname(e.get(),
                               is_root ? "./" : (type == S_IFDIR ? rel + "/" : rel).c_str());
    archive_entry_set_mode(e.get(), st.st_mode);
    archive_entry_set_uid(e.get(), st.st_uid);
    archive_entry_set_gid(e.get(), st.st_gid);
    archive_entry_set_mtime(e.get(), st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    if (Status s = AddXattrs(path, e.get()); !s.ok()) return s;
    UniqueFd fd;
    if (type == S_IFLNK) {
      std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
      ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
      if (n < 0) return FsError("read the link", path, errno);
      target.resize(static_cast<size_t>(n));
      archive_entry_set_symlink(e.get(), target.c_str());
    } else if (type == S_IFREG) {
      // A second name of a file already written is a hard link to the first.
      auto [it, first] = written_.try_emplace({st.st_dev, st.st_ino}, rel);
      if (!first) {
        archive_entry_set_hardlink(e.get(), it->second.c_str());
        archive_entry_set_size(e.get(), 0);
      } else {
        fd.reset(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
        if (!fd) return FsError("open", path, errno);
        archive_entry_set_size(e.get(), st.st_size);
      }
    }
    if (archive_write_header(a_.get(), e.get()) != ARCHIVE_OK)
      return ArchiveError("write the header of", path);
    if (cancelled_) return Gone();
    if (fd) {
      if (Status s = CopyData(fd.get(), static_cast<uint64_t>(st.st_size), path); !s.ok()) return s;
    }
    if (type != S_IFDIR) return Status::Ok();
    auto names = SortedNames(path);
    if (!names.ok()) return names.status();
    for (const auto& name : *names) {
      if (Status s = Add(rel.empty() ? name : rel + "/" + name, false); !s.ok()) return s;
    }
    return Status::Ok();
  }

  Status CopyData(int fd, uint64_t size, const std::string& path) {
    if (!buf_) buf_ = std::make_unique<char[]>(kChunk);
    for (uint64_t left = size; left > 0;) {
      ssize_t n = ::read(fd, buf_.get(), std::min<uint64_t>(left, kChunk));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return FsError("read", path, errno);
      if (n == 0) return Status(Code::kIoError, "layer export: " + path + " shrank while read");
      if (archive_write_data(a_.get(), buf_.get(), static_cast<size_t>(n)) != n)
        return ArchiveError("write the data of", path);
      if (cancelled_) return Gone();
      left -= static_cast<uint64_t>(n);
    }
    return Status::Ok();
  }

  const std::function<bool(std::string_view)>& write_;
  std::unique_ptr<archive, ArchiveDeleter> a_;
  std::string root_;
  std::map<std::pair<dev_t, ino_t>, std::string> written_;
  std::unique_ptr<char[]> buf_;
  bool cancelled_ = false;
};

}  // namespace

Status WriteLayerTar(const std::string& dir, const std::function<bool(std::string_view)>& write) {
  return TarWriter(write).Run(dir);
}

Result<LayerTarDigest> DigestLayerTar(const std::string& dir) {
  Sha256 hash;
  uint64_t size = 0;
  Status s = WriteLayerTar(dir, [&](std::string_view data) {
    hash.Update(data);
    size += data.size();
    return true;
  });
  if (!s.ok()) return s;
  return LayerTarDigest{hash.HexDigest(), size};
}

}  // namespace kiln::images
