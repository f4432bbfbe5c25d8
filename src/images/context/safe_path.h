// Paths inside an image or a build context, resolved as the image sees them.
//
// An image's files are untrusted: /etc/passwd may be a symlink to /etc/shadow,
// a directory may be a symlink to "../../..". Reading them with the host's
// path resolution would read the host. OpenInRoot uses openat2's
// RESOLVE_IN_ROOT, which makes `root` the "/" of every lookup, "..", absolute
// symlinks included, so nothing outside `root` can be reached. The lexical
// path helpers (CleanPath and its kin) are images/parse/image_path.h's.
#pragma once

#include <string>

#include "common/status.h"
#include "common/unique_fd.h"
#include "images/parse/image_path.h"  // CleanPath, PathParts, EscapesRoot

namespace kiln::images {

// Opens `path` (absolute or relative, inside the image) beneath `root` with
// openat2(RESOLVE_IN_ROOT), so symlinks in the image resolve inside it and
// never reach the host. `flags` as open(2) (O_CLOEXEC is always added;
// O_NOFOLLOW with O_PATH opens a final symlink itself). kFileNotFound when a
// component is missing or not a directory, kIoError otherwise; both name the
// path.
Result<UniqueFd> OpenInRoot(const std::string& root, const std::string& path, int flags);

}  // namespace kiln::images
