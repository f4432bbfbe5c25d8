// Unpacking one image layer into a directory of its own.
//
// Each layer is stored once, unpacked and keyed by its diff id, and shared by
// every image built on it (see flatten.h). A layer directory keeps the
// layer's files with their ownership, modes (setuid, setgid and sticky bits
// included), mtimes, symlinks, hard links within the layer, fifos and
// xattrs (except trusted.overlay.*, which would confuse the host's overlayfs).
// Deletions are kept in OCI form, to be applied when layers are flattened:
//   .wh.<name>      an empty file: <name> is deleted from lower layers;
//   .wh..wh..opq    an empty file: this directory hides all of lower layers'.
// Device nodes are skipped (gVisor gives a sandbox its own /dev) and counted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace kiln::images {

struct UnpackOptions {
  // Hex of the bytes as stored (compressed); mismatch -> kInvalidImage.
  std::optional<std::string> expected_blob_sha256;
  // Hex of the uncompressed tar; mismatch -> kInvalidImage.
  std::optional<std::string> expected_diff_id;
  // 0 = no limit; past it -> kQuotaExceeded naming the limit.
  uint64_t max_bytes = 0;
  // Relative paths dropped with everything under them ("opt/kiln", "run/kiln"):
  // where kiln mounts its own files, which no image may shadow.
  std::vector<std::string> skip_prefixes;
};

struct LayerStats {
  std::string blob_sha256, diff_id;  // hex, both computed while reading
  uint64_t bytes = 0;                // sum of regular file sizes written
  uint64_t files = 0, whiteouts = 0, devices_skipped = 0;
};

// Unpacks the tar at `tar_path` (plain, gzip or zstd, told apart by their
// bytes) into `dest_dir`, which is created (with missing parents) and must not
// exist (kFileExists). Accepts both deletion encodings: OCI `.wh.` entries,
// kept as files, and overlayfs ones as written by `runsc tar rootfs-upper`: a
// character device 0/0 (or a hard link to one) becomes `.wh.<name>`, and a
// directory with the pax xattr SCHILY.xattr.trusted.overlay.opaque=y gets
// `.wh..wh..opq`.
//
// Entry paths are cleaned ("./a" -> "a"). An absolute path, a ".." that
// leaves the root, a hard link to such a path, or a write through a symlink
// (or a non-directory) made by an earlier entry is refused with kInvalidImage
// naming the entry. Ownership is set with lchown, then the mode (after chown,
// so setuid bits survive), then xattrs, then mtime (utimensat
// AT_SYMLINK_NOFOLLOW; directories' last, once their contents are written).
// Without root, ownership is left to the caller's uid.
//
// `files` counts regular files and hard links to them, whiteout markers
// apart; `whiteouts` counts markers of both encodings. A digest given in
// options is compared with the computed one (a "sha256:" prefix is
// accepted). On any error nothing is left at dest_dir.
Result<LayerStats> UnpackLayer(const std::string& tar_path, const std::string& dest_dir,
                               const UnpackOptions& options = {});

// `path` with "." components, repeated and trailing slashes removed and ".."
// resolved, "" for the root; nullopt if it is absolute or leaves the root.
std::optional<std::string> CleanLayerPath(const std::string& path);

}  // namespace kiln::images
