// Helpers for the images tests: layer tars written with libarchive's writer,
// temp dirs, and small file reads. Header-only, test code only.
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "images/layers/flatten.h"

namespace kiln::images::layer_testing {

enum class Compression { kNone, kGzip, kZstd };

// An entry's metadata; Dir() turns the default 0644 into 0755.
struct Meta {
  unsigned perm = 0644;
  int64_t uid = 0, gid = 0;
  time_t mtime = 1700000000;
  std::map<std::string, std::string> xattrs;
};

// Writes a pax tar entry by entry. Paths are written exactly as given, so
// tests can write "./a", "../x" or "/abs".
class TarWriter {
 public:
  explicit TarWriter(const std::string& path, Compression c = Compression::kNone) {
    a_ = archive_write_new();
    if (c == Compression::kGzip) archive_write_add_filter_gzip(a_);
    if (c == Compression::kZstd) archive_write_add_filter_zstd(a_);
    archive_write_set_format_pax(a_);
    ok_ = archive_write_open_filename(a_, path.c_str()) == ARCHIVE_OK;
  }
  ~TarWriter() { Close(); }
  bool ok() const { return ok_; }

  void File(const std::string& path, const std::string& data, Meta m = {}) {
    Add(
        path, AE_IFREG, m, data.size(), [&](archive_entry*) {}, data);
  }
  void Dir(const std::string& path, Meta m = {}) {
    if (m.perm == 0644) m.perm = 0755;
    Add(path, AE_IFDIR, m, 0, [](archive_entry*) {});
  }
  void Symlink(const std::string& path, const std::string& target, Meta m = {}) {
    m.perm = 0777;
    Add(path, AE_IFLNK, m, 0,
        [&](archive_entry* e) { archive_entry_set_symlink(e, target.c_str()); });
  }
  void HardLink(const std::string& path, const std::string& target, Meta m = {}) {
    Add(path, AE_IFREG, m, 0,
        [&](archive_entry* e) { archive_entry_set_hardlink(e, target.c_str()); });
  }
  void Fifo(const std::string& path, Meta m = {}) {
    Add(path, AE_IFIFO, m, 0, [](archive_entry*) {});
  }
  void Device(const std::string& path, unsigned type, int major, int minor, Meta m = {}) {
    Add(path, type, m, 0, [&](archive_entry* e) {
      archive_entry_set_rdevmajor(e, major);
      archive_entry_set_rdevminor(e, minor);
    });
  }
  void Close() {
    if (!a_) return;
    ok_ = archive_write_close(a_) == ARCHIVE_OK && ok_;
    archive_write_free(a_);
    a_ = nullptr;
  }

 private:
  template <typename F>
  void Add(const std::string& path, unsigned type, const Meta& m, size_t size, F&& extra,
           const std::string& data = "") {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, path.c_str());
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, m.perm);
    archive_entry_set_uid(e, m.uid);
    archive_entry_set_gid(e, m.gid);
    archive_entry_set_mtime(e, m.mtime, 0);
    archive_entry_set_size(e, static_cast<la_int64_t>(size));
    for (const auto& [k, v] : m.xattrs)
      archive_entry_xattr_add_entry(e, k.c_str(), v.data(), v.size());
    extra(e);
    if (archive_write_header(a_, e) != ARCHIVE_OK) ok_ = false;
    if (!data.empty() && archive_write_data(a_, data.data(), data.size()) < 0) ok_ = false;
    archive_entry_free(e);
  }
  archive* a_ = nullptr;
  bool ok_ = false;
};

// A fresh directory under /tmp, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kiln-images-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { (void)RemoveTree(path_); }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

inline bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

inline struct stat Lstat(const std::string& path) {
  struct stat st = {};
  ::lstat(path.c_str(), &st);
  return st;
}

}  // namespace kiln::images::layer_testing
