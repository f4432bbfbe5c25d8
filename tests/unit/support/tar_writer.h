// The one tar writer of the unit tests, over libarchive. Paths, modes and
// link targets are written exactly as given, so tests can write what no
// well-behaved packer would ("./a", "../x", "/abs", devices, setuid files).
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <time.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace kiln::testutil {

enum class Compression { kNone, kGzip, kZstd };

// kPax adds an extended header whenever libarchive sees fit; kPaxRestricted
// only when a field does not fit ustar's.
enum class TarFormat { kPax, kPaxRestricted };

// An entry's metadata; TarWriter::Dir turns the default 0644 into 0755.
struct TarMeta {
  unsigned perm = 0644;
  int64_t uid = 0, gid = 0;
  std::optional<time_t> mtime = 1700000000;  // nullopt: left unset (0)
  std::map<std::string, std::string> xattrs;
};

// One entry with every field given: TarWriter::Add writes it as is.
struct TarRecord {
  std::string path;
  unsigned type = AE_IFREG;
  TarMeta meta;
  std::string data;      // a regular file's contents
  std::string symlink;   // the target of an AE_IFLNK
  std::string hardlink;  // the target of a hard link (type AE_IFREG, no data)
  int rdev_major = 0, rdev_minor = 0;
};

// Writes a tar at a path entry by entry; Close (or the destructor) ends it.
class TarWriter {
 public:
  explicit TarWriter(const std::string& path, Compression c = Compression::kNone,
                     TarFormat format = TarFormat::kPax) {
    a_ = archive_write_new();
    if (c == Compression::kGzip) archive_write_add_filter_gzip(a_);
    if (c == Compression::kZstd) archive_write_add_filter_zstd(a_);
    if (format == TarFormat::kPax) {
      archive_write_set_format_pax(a_);
    } else {
      archive_write_set_format_pax_restricted(a_);
    }
    ok_ = archive_write_open_filename(a_, path.c_str()) == ARCHIVE_OK;
  }
  ~TarWriter() { Close(); }
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;

  // Whether every entry so far was written.
  bool ok() const { return ok_; }

  void File(const std::string& path, const std::string& data, TarMeta m = {}) {
    Add({.path = path, .type = AE_IFREG, .meta = m, .data = data});
  }
  void Dir(const std::string& path, TarMeta m = {}) {
    if (m.perm == 0644) m.perm = 0755;
    Add({.path = path, .type = AE_IFDIR, .meta = m});
  }
  void Symlink(const std::string& path, const std::string& target, TarMeta m = {}) {
    m.perm = 0777;
    Add({.path = path, .type = AE_IFLNK, .meta = m, .symlink = target});
  }
  void HardLink(const std::string& path, const std::string& target, TarMeta m = {}) {
    Add({.path = path, .type = AE_IFREG, .meta = m, .hardlink = target});
  }
  void Fifo(const std::string& path, TarMeta m = {}) {
    Add({.path = path, .type = AE_IFIFO, .meta = m});
  }
  void Device(const std::string& path, unsigned type, int major, int minor, TarMeta m = {}) {
    Add({.path = path, .type = type, .meta = m, .rdev_major = major, .rdev_minor = minor});
  }

  void Add(const TarRecord& r) {
    if (!a_) return;
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, r.path.c_str());
    archive_entry_set_filetype(e, r.type);
    archive_entry_set_perm(e, r.meta.perm);
    archive_entry_set_uid(e, r.meta.uid);
    archive_entry_set_gid(e, r.meta.gid);
    if (r.meta.mtime) archive_entry_set_mtime(e, *r.meta.mtime, 0);
    archive_entry_set_size(e, static_cast<la_int64_t>(r.data.size()));
    for (const auto& [k, v] : r.meta.xattrs)
      archive_entry_xattr_add_entry(e, k.c_str(), v.data(), v.size());
    if (!r.symlink.empty()) archive_entry_set_symlink(e, r.symlink.c_str());
    if (!r.hardlink.empty()) archive_entry_set_hardlink(e, r.hardlink.c_str());
    if (r.type == AE_IFCHR || r.type == AE_IFBLK) {
      archive_entry_set_rdevmajor(e, r.rdev_major);
      archive_entry_set_rdevminor(e, r.rdev_minor);
    }
    if (archive_write_header(a_, e) != ARCHIVE_OK) ok_ = false;
    if (!r.data.empty() && archive_write_data(a_, r.data.data(), r.data.size()) < 0) ok_ = false;
    archive_entry_free(e);
  }

  void Close() {
    if (!a_) return;
    ok_ = archive_write_close(a_) == ARCHIVE_OK && ok_;
    archive_write_free(a_);
    a_ = nullptr;
  }

 private:
  archive* a_ = nullptr;
  bool ok_ = false;
};

}  // namespace kiln::testutil
