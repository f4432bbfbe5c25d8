// Walking and removing directory trees by file descriptor, never following a
// symlink. Image roots and layers are built from untrusted tars: a symlink
// anywhere in them may point at the host, so every step below a trusted root
// goes through openat(O_NOFOLLOW) rather than through a path string.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace kiln::images {

// A status for a failed system call: "<what>: <strerror(err)>" under `code`,
// with {"path": path} as details when `path` is not empty.
// The whiteout entry that makes a directory opaque in a layer (OCI image
// spec): nothing of the layers below shows through it.
inline constexpr const char* kOpaqueWhiteout = ".wh..wh..opq";

Status ErrnoStatus(Code code, const std::string& what, int err, const std::string& path = "");

// Opens the directory `name` under `dirfd` (O_PATH-free, readable); an invalid
// fd with errno set (ELOOP or ENOTDIR for a symlink) on failure.
UniqueFd OpenDirAt(int dirfd, const std::string& name);

// The entry names of the open directory `dirfd` except "." and "..", sorted
// so that results do not depend on the file system's order.
Result<std::vector<std::string>> ListDir(int dirfd);

// Removes `name` under `dirfd` and, if it is a directory, everything in it.
// A missing `name` is not an error. `freed`, if given, grows by the blocks
// of the regular files whose last link went (what the removal gave back to
// the disk, without walking anything that stays).
Status RemoveTreeAt(int dirfd, const std::string& name, uint64_t* freed = nullptr);

// Removes every entry of the open directory `dirfd`, keeping the directory.
Status ClearDir(int dirfd, uint64_t* freed = nullptr);

}  // namespace kiln::images
