#include "agent/xattrs.h"

#include <linux/limits.h>
#include <sys/xattr.h>

#include <cerrno>
#include <vector>

#include "proto/ops.h"

namespace kiln::agent {
namespace {

// The names in a listxattr buffer: NUL-terminated, one after another.
std::vector<std::string> SplitNames(const std::vector<char>& buf, size_t len) {
  std::vector<std::string> names;
  for (size_t at = 0; at < len;) {
    std::string name(buf.data() + at);
    at += name.size() + 1;
    if (!name.empty()) names.push_back(std::move(name));
  }
  return names;
}

// Every attribute name of `path` (or of `fd` when it is not -1).
std::vector<std::string> ListNames(const std::string& path, int fd) {
  // Sized by asking first; a name added in between makes the second call
  // fail with ERANGE, then it is asked again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    ssize_t need = fd >= 0 ? ::flistxattr(fd, nullptr, 0) : ::llistxattr(path.c_str(), nullptr, 0);
    if (need <= 0) return {};
    std::vector<char> buf(static_cast<size_t>(need) + 1, '\0');
    ssize_t got = fd >= 0 ? ::flistxattr(fd, buf.data(), buf.size())
                          : ::llistxattr(path.c_str(), buf.data(), buf.size());
    if (got >= 0) return SplitNames(buf, static_cast<size_t>(got));
    if (errno != ERANGE) return {};
  }
  return {};
}

}  // namespace

std::string CheckXattrPrefix(std::string_view prefix) {
  if (!prefix.starts_with("user.") || prefix.size() <= 5)
    return "xattrPrefix must start with 'user.' and name more";
  if (prefix.size() > proto::kMaxXattrPrefix)
    return "xattrPrefix is longer than " + std::to_string(proto::kMaxXattrPrefix) + " bytes";
  for (char c : prefix) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return "xattrPrefix holds a byte other than letters, digits, '.', '_' and '-'";
  }
  return "";
}

std::map<std::string, std::string> ReadXattrs(const std::string& path, std::string_view prefix) {
  std::map<std::string, std::string> out;
  if (prefix.empty()) return out;
  for (const std::string& name : ListNames(path, -1)) {
    if (!name.starts_with(prefix)) continue;
    if (out.size() >= proto::kMaxXattrs) break;
    char value[proto::kMaxXattrValue];
    ssize_t n = ::lgetxattr(path.c_str(), name.c_str(), value, sizeof value);
    if (n >= 0) out[name] = std::string(value, static_cast<size_t>(n));
  }
  return out;
}

int ReplaceXattrs(int fd, std::string_view prefix,
                  const std::map<std::string, std::string>& values) {
  if (values.size() > proto::kMaxXattrs) return EINVAL;
  for (const auto& [name, value] : values)
    if (!name.starts_with(prefix) || name.size() == prefix.size() || name.size() > XATTR_NAME_MAX ||
        value.size() > proto::kMaxXattrValue)
      return EINVAL;
  for (const std::string& name : ListNames("", fd))
    if (name.starts_with(prefix) && !values.count(name) && ::fremovexattr(fd, name.c_str()) < 0 &&
        errno != ENODATA)
      return errno;
  for (const auto& [name, value] : values)
    if (::fsetxattr(fd, name.c_str(), value.data(), value.size(), 0) < 0) return errno;
  return 0;
}

}  // namespace kiln::agent
