// Extended attributes as file metadata (E2B's envd keeps a file's metadata
// as user.e2b.* attributes). Only a prefix in the user namespace is read or
// written: trusted.* and security.* stay the kernel's and the image's.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace kiln::agent {

// "" when `prefix` may be asked for: "user." and more, at most
// proto::kMaxXattrPrefix bytes of letters, digits, '.', '_' and '-';
// else why not.
std::string CheckXattrPrefix(std::string_view prefix);

// `path`'s attributes (the link itself, not what it points to) whose names
// start with `prefix`, whole names: at most proto::kMaxXattrs, a value
// longer than proto::kMaxXattrValue left out (bytes that are not UTF-8
// reach kilnd as U+FFFD, as every string the agent sends). Empty on any
// error: metadata never fails a stat.
std::map<std::string, std::string> ReadXattrs(const std::string& path, std::string_view prefix);

// Leaves `fd`'s file with exactly `values` under `prefix` (whole names):
// the prefix's other attributes removed first. 0 or an errno; EINVAL for a
// name outside the prefix or past the caps.
int ReplaceXattrs(int fd, std::string_view prefix,
                  const std::map<std::string, std::string>& values);

}  // namespace kiln::agent
