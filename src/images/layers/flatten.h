// An image's root file system as a hard-link farm over its layers.
//
// gVisor uses an image root read-only (a sandbox's writes go to its own
// overlay), so the root need not own its files: every regular file in it is a
// hard link to the file in its layer directory (see layer_unpack.h), and a
// hundred images on one base cost the base's bytes once. That is also why a
// layer's files must never be written through an image root.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace kiln::images {

struct FlattenStats {
  uint64_t linked = 0, copied = 0, dirs = 0, whiteouts_applied = 0;
};

// Builds `dest` (created with missing parents; must not exist: kFileExists)
// from layer dirs given bottom to top: directories are created with the
// mode, owner, xattrs and mtime of the topmost layer that has them; regular
// files are hard links to the topmost layer's file (a copy when link() fails
// with EMLINK or EXDEV); symlinks and fifos are recreated; `.wh.<name>`
// removes <name> from what lower layers put there; `.wh..wh..opq` empties the
// directory of lower layers' entries first; a non-directory in an upper layer
// replaces a lower directory and vice versa. Whiteout files never appear in
// dest; a whiteout for "." or ".." is kInvalidImage.
//
// Nothing is ever reached through a symlink: a lower layer's "etc -> /host"
// is replaced by an upper layer's directory "etc" (which a layer with
// "etc/x" always has), never followed. `dirs` counts directories created,
// `whiteouts_applied` the markers that removed something. On error nothing
// is left at dest. The layers are only read.
Result<FlattenStats> Flatten(const std::vector<std::string>& layer_dirs, const std::string& dest);

// Removes a directory tree without following symlinks (for image roots and
// layers; chattr-free, root-owned). A missing path is not an error; "/" and
// "" are refused (kInvalidRequest). `freed`: as RemoveTreeAt's (fs_tree.h).
Status RemoveTree(const std::string& path, uint64_t* freed = nullptr);

// Bytes of regular files under `dir` counted once per inode (st_blocks*512),
// for disk-use figures. Unreadable parts count as 0.
uint64_t DiskUsage(const std::string& dir);

// Disk use of several trees together, each inode counted once across all of
// them (the bytes that removing all of them would free, if nothing else links).
uint64_t SharedDiskUsage(const std::vector<std::string>& dirs);

}  // namespace kiln::images
