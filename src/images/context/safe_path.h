// Paths inside an image or a build context, resolved as the image sees them.
//
// An image's files are untrusted: /etc/passwd may be a symlink to /etc/shadow,
// a directory may be a symlink to "../../..". Reading them with the host's
// path resolution would read the host. OpenInRoot uses openat2's
// RESOLVE_IN_ROOT, which makes `root` the "/" of every lookup, "..", absolute
// symlinks included, so nothing outside `root` can be reached.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace kiln::images {

// Opens `path` (absolute or relative, inside the image) beneath `root` with
// openat2(RESOLVE_IN_ROOT), so symlinks in the image resolve inside it and
// never reach the host. `flags` as open(2) (O_CLOEXEC is always added;
// O_NOFOLLOW with O_PATH opens a final symlink itself). kFileNotFound when a
// component is missing or not a directory, kIoError otherwise; both name the
// path.
Result<UniqueFd> OpenInRoot(const std::string& root, const std::string& path, int flags);

// Cleans an in-image path lexically: "a/./b/../c" -> "/a/c"; ".." above the
// root stays at "/"; the result is always absolute, without a trailing "/".
std::string CleanPath(std::string_view path);

// The components of CleanPath(path): "/a/./b/" -> {"a", "b"}; "/" -> {}.
std::vector<std::string> PathParts(std::string_view path);

// True if `path`, read relative to a root, climbs above it ("../x",
// "a/../../x"), which CleanPath would silently clamp.
bool EscapesRoot(std::string_view path);

}  // namespace kiln::images
