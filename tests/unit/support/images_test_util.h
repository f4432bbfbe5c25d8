// Helpers for the images tests: file reads and writes, and tars given as a
// list of entries (written with unit/support/tar_writer.h, so they can hold
// what no well-behaved packer would: "../x", devices).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "unit/support/tar_writer.h"

namespace kiln::images::testing {

inline void WriteFile(const std::string& path, const std::string& data, mode_t mode = 0644) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  ::chmod(path.c_str(), mode);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TarEntry {
  std::string name;
  char type = 'f';   // f file, d dir, l symlink, h hard link, c char device
  std::string data;  // contents, or the link target
  mode_t mode = 0644;
  int64_t uid = 0, gid = 0;
};

// Writes `entries` as a pax tar at `path`, gzip'ed if `gzip`: each entry
// exactly as given (a directory keeps 0644 if told so), with no mtime.
inline void WriteTar(const std::string& path, const std::vector<TarEntry>& entries,
                     bool gzip = true) {
  testutil::TarWriter w(path, gzip ? testutil::Compression::kGzip : testutil::Compression::kNone,
                        testutil::TarFormat::kPaxRestricted);
  for (const TarEntry& t : entries) {
    testutil::TarRecord r{
        .path = t.name,
        .meta = {.perm = t.mode, .uid = t.uid, .gid = t.gid, .mtime = std::nullopt}};
    switch (t.type) {
      case 'd':
        r.type = AE_IFDIR;
        break;
      case 'l':
        r.type = AE_IFLNK;
        r.symlink = t.data;
        break;
      case 'h':
        r.hardlink = t.data;
        break;
      case 'c':
        r.type = AE_IFCHR;
        r.rdev_major = 1;
        r.rdev_minor = 3;
        break;
      default:
        r.data = t.data;
    }
    w.Add(r);
  }
}

inline mode_t ModeOf(const std::string& path) {
  struct stat st {};
  ::lstat(path.c_str(), &st);
  return st.st_mode & 07777;
}

}  // namespace kiln::images::testing
