// Build contexts: the directory a Dockerfile's COPY and ADD read from.
//
// A client sends its context as one tar (the CLI packs it with
// cli/image_context.h's PackContext, the SDKs alike). The daemon unpacks it into a fresh directory
// that the builder then treats as read-only. The tar is untrusted: its names may try to climb out
// ("../x", "/etc/x", a symlink "d -> /" followed by "d/x"), it may hold devices, and it may be a
// compression bomb, so unpacking walks every directory without following symlinks and counts as it
// writes.
//
// Functions here are thread-compatible: concurrent calls on different
// destinations are safe.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "images/context/dockerignore.h"

namespace kiln::images {

struct ContextLimits {
  uint64_t max_compressed = 100ull << 20;  // the tar as sent
  uint64_t max_files = 20000;              // entries of any type, directories included
  uint64_t max_unpacked = 2ull << 30;      // bytes of file contents
};

struct ContextStats {
  uint64_t files = 0;  // entries unpacked (files, directories, symlinks, hard links)
  uint64_t bytes = 0;  // bytes of file contents written
};

// Unpacks a context tar (plain or gzip; bzip2 and xz are accepted too) into
// `dest`, which must not exist (kFileExists) and is created 0755.
//
// Sizes past a limit -> kPayloadTooLarge with details {"limit": "files" |
// "unpackedBytes" | "compressedBytes", "max": N}. Entries that escape
// (absolute names, "..", a path through a symlink), devices, fifos, and hard
// links to outside or to a missing entry -> kInvalidArchive naming the entry
// (details {"entry": NAME}); a corrupt or truncated tar -> kInvalidArchive.
// Files get the tar's permission bits and mtimes, owner root:root (when run
// as root). If `ignore` is given, excluded entries are skipped (".dockerignore"
// and "Dockerfile" at the top are always kept). On error nothing is left at
// dest.
Result<ContextStats> UnpackContext(const std::string& tar_path, const std::string& dest,
                                   const ContextLimits& limits, const DockerIgnore* ignore);

}  // namespace kiln::images
