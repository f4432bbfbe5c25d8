// libarchive's message for its last error. archive_error_string returns
// null when libarchive set no message (a corrupt header can do that), and a
// null appended to a std::string is a crash: found by fuzz_tar.
#pragma once

#include <archive.h>

#include <string>

namespace kiln {

inline std::string ArchiveError(archive* a) {
  const char* why = archive_error_string(a);
  return why ? why : "unknown libarchive error";
}

}  // namespace kiln
