// The web console's files, read once when kilnd starts. A request names a
// file by its path under /ui and only names in this table are answered, so
// no part of a URL ever becomes a host path.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kiln::api {

class ConsoleFiles {
 public:
  // The bundle is a few hundred KiB; these only stop a wrong --console-dir
  // (a home folder, /) from filling kilnd's memory.
  static constexpr size_t kMaxFileBytes = 8 << 20;
  static constexpr size_t kMaxTotalBytes = 64 << 20;
  static constexpr size_t kMaxFiles = 256;

  struct File {
    std::string bytes;
    std::string content_type;
    std::string etag;  // "\"<16 hex of XXH3>\""
  };

  // Reads the regular files of `dir` and of its sub-folders one level down
  // whose names pass ValidName (others are skipped, symlinks included). A
  // missing folder is an empty table; one past the limits is an error.
  static Result<ConsoleFiles> Load(const std::filesystem::path& dir);

  // "index.html", "assets/font.woff2"; null for anything else.
  const File* Find(std::string_view name) const;
  bool empty() const { return files_.empty(); }
  size_t size() const { return files_.size(); }

  // One or two segments of [A-Za-z0-9_.-], none starting with a dot.
  static bool ValidName(std::string_view name);
  static std::string ContentTypeOf(std::string_view name);

 private:
  std::map<std::string, File, std::less<>> files_;
};

}  // namespace kiln::api
