#include "images/context/image_users.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <optional>
#include <vector>

#include "common/unique_fd.h"
#include "images/context/safe_path.h"

namespace kiln::images {
namespace {

constexpr size_t kMaxFile = 4 << 20;  // no real passwd is near this

// A file of the image, "" if it is missing; kIoError past kMaxFile.
Result<std::string> ReadImageFile(const std::string& root, const std::string& path) {
  Result<UniqueFd> fd = OpenInRoot(root, path, O_RDONLY);
  if (!fd.ok()) {
    if (fd.status().code() == Code::kFileNotFound) return std::string();
    return fd.status();
  }
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd->get(), buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status(Code::kIoError, "read " + path + " in the image", {{"path", path}});
    }
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxFile) {
      return Status(Code::kIoError, path + " in the image is too large", {{"path", path}});
    }
  }
  return text;
}

std::optional<uint32_t> ParseId(std::string_view s) {
  uint32_t v = 0;
  if (s.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v == UINT32_MAX) return std::nullopt;
  return v;
}

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  for (;;) {
    size_t j = line.find(':', i);
    out.push_back(line.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) return out;
    i = j + 1;
  }
}

// Calls `fn(fields)` for each well-formed line (at least `min` fields, no
// NIS "+"/"-" entries); stops when it returns true.
template <typename Fn>
void ForEachEntry(std::string_view text, size_t min, Fn fn) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line[0] == '#' || line[0] == '+' || line[0] == '-') continue;
    std::vector<std::string_view> f = Fields(line);
    if (f.size() < min || f[0].empty() || !ParseId(f[2])) continue;
    if (fn(f)) return;
  }
}

struct PasswdEntry {
  std::string name, home;
  uint32_t uid, gid;
};

std::optional<PasswdEntry> FindUser(std::string_view passwd, std::optional<uint32_t> uid,
                                    std::string_view name) {
  std::optional<PasswdEntry> found;
  ForEachEntry(passwd, 7, [&](const std::vector<std::string_view>& f) {
    uint32_t id = *ParseId(f[2]);
    if (uid ? id != *uid : f[0] != name) return false;
    std::optional<uint32_t> gid = ParseId(f[3]);
    found =
        PasswdEntry{std::string(f[0]), f[5].empty() ? "/" : std::string(f[5]), id, gid.value_or(0)};
    return true;
  });
  return found;
}

std::optional<uint32_t> FindGroup(std::string_view group, std::string_view name) {
  std::optional<uint32_t> gid;
  ForEachEntry(group, 3, [&](const std::vector<std::string_view>& f) {
    if (f[0] != name) return false;
    gid = *ParseId(f[2]);
    return true;
  });
  return gid;
}

}  // namespace

Result<ImageUser> ResolveImageUser(const std::string& root, std::string_view spec) {
  const bool empty = spec.empty();
  if (empty) spec = "0";
  size_t colon = spec.find(':');
  std::string_view user = spec.substr(0, colon);
  std::optional<std::string_view> group;
  if (colon != std::string_view::npos) group = spec.substr(colon + 1);
  auto bad = [&](std::string_view why) {
    return Status(Code::kInvalidRequest,
                  "bad user \"" + std::string(spec) + "\": " + std::string(why),
                  {{"user", std::string(spec)}});
  };
  if (user.empty()) return bad("no user before \":\"");
  if (group && (group->empty() || group->find(':') != std::string_view::npos)) {
    return bad("expected user[:group]");
  }

  Result<std::string> passwd = ReadImageFile(root, "/etc/passwd");
  if (!passwd.ok()) return passwd.status();
  ImageUser out;
  // "root" is uid 0 even in an image without /etc/passwd (scratch, distroless).
  std::optional<uint32_t> uid = user == "root" ? std::optional<uint32_t>(0) : ParseId(user);
  bool digits = user.find_first_not_of("0123456789") == std::string_view::npos;
  if (digits && !uid) return bad("user id out of range");
  std::optional<PasswdEntry> entry = FindUser(*passwd, uid, user);
  if (entry) {
    out.uid = entry->uid;
    out.gid = entry->gid;
    out.name = entry->name;
    out.home = entry->home;
  } else if (uid) {
    out.uid = *uid;
    out.gid = 0;
    out.name = empty ? "root" : std::string(user);
  } else {
    return Status(Code::kInvalidRequest, "unknown user " + std::string(user) + " in the image",
                  {{"user", std::string(user)}});
  }

  if (group) {
    std::optional<uint32_t> gid = ParseId(*group);
    bool gdigits = group->find_first_not_of("0123456789") == std::string_view::npos;
    if (gdigits && !gid) return bad("group id out of range");
    if (!gid) {
      Result<std::string> groups = ReadImageFile(root, "/etc/group");
      if (!groups.ok()) return groups.status();
      gid = FindGroup(*groups, *group);
      if (!gid) {
        return Status(Code::kInvalidRequest,
                      "unknown group " + std::string(*group) + " in the image",
                      {{"group", std::string(*group)}});
      }
    }
    out.gid = *gid;
  }
  return out;
}

}  // namespace kiln::images
