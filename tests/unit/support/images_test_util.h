// Helpers for the images tests: a temporary directory and a tar writer
// that can write what no well-behaved packer would ("../x", devices).
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::images::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-images-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    namespace fs = std::filesystem;
    std::error_code ec;
    // A test may leave a 0640 directory a non-root run cannot enter: open up first.
    for (fs::recursive_directory_iterator it(path_, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) {
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
      }
    }
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

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

// Writes `entries` as a tar at `path`, gzip'ed if `gzip`.
inline void WriteTar(const std::string& path, const std::vector<TarEntry>& entries,
                     bool gzip = true) {
  archive* a = archive_write_new();
  if (gzip) archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  archive_write_open_filename(a, path.c_str());
  for (const TarEntry& t : entries) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, t.name.c_str());
    archive_entry_set_perm(e, t.mode);
    archive_entry_set_uid(e, t.uid);
    archive_entry_set_gid(e, t.gid);
    switch (t.type) {
      case 'd':
        archive_entry_set_filetype(e, AE_IFDIR);
        break;
      case 'l':
        archive_entry_set_filetype(e, AE_IFLNK);
        archive_entry_set_symlink(e, t.data.c_str());
        break;
      case 'h':
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_hardlink(e, t.data.c_str());
        break;
      case 'c':
        archive_entry_set_filetype(e, AE_IFCHR);
        archive_entry_set_rdevmajor(e, 1);
        archive_entry_set_rdevminor(e, 3);
        break;
      default:
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_size(e, static_cast<int64_t>(t.data.size()));
    }
    archive_write_header(a, e);
    if (t.type == 'f') archive_write_data(a, t.data.data(), t.data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

inline mode_t ModeOf(const std::string& path) {
  struct stat st {};
  ::lstat(path.c_str(), &st);
  return st.st_mode & 07777;
}

}  // namespace kiln::images::testing
