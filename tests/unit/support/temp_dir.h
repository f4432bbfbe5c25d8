// A fresh directory under $TMPDIR (or /tmp) for one test, removed with
// everything in it when the TempDir goes. Every unit test that needs scratch
// space uses this one, so cleanup is done the same way everywhere.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace kiln::testutil {

class TempDir {
 public:
  // The directory's name is `prefix` and six random characters, in `parent`
  // (the temp directory if ""). Throws if it cannot be made: a test without
  // its directory would test nothing.
  explicit TempDir(const std::string& prefix = "kiln-test", const std::string& parent = "") {
    const std::filesystem::path in =
        parent.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(parent);
    std::string tmpl = (in / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    namespace fs = std::filesystem;
    std::error_code ec;
    // A test may leave a directory a non-root run cannot enter or empty
    // (0640, 0555): open each up before going into it.
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    for (fs::recursive_directory_iterator it(path_, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) {
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
      }
    }
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // The path of `rel` inside the directory.
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

  // Writes `data` to `rel` (making its parent directories) with `mode`, and
  // returns its path.
  std::string Write(const std::string& rel, const std::string& data, mode_t mode = 0644) const {
    const std::string file = *this / rel;
    std::filesystem::create_directories(std::filesystem::path(file).parent_path());
    std::ofstream(file, std::ios::binary | std::ios::trunc) << data;
    ::chmod(file.c_str(), mode);
    return file;
  }

 private:
  std::string path_;
};

}  // namespace kiln::testutil
