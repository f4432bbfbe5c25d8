// Internal: the one tar extractor behind UnpackContext and ADD. Not part of
// the images interface.
//
// Every directory on an entry's way is opened with O_NOFOLLOW relative to the
// destination's fd, so an entry can never be written through a symlink (one
// from the archive itself or one that was there before): the walk fails with
// ELOOP and the entry is refused.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "common/status.h"
#include "images/context/build_context.h"
#include "images/context/dockerignore.h"

namespace kiln::images::internal {

struct ExtractOptions {
  ContextLimits limits;  // max_compressed is the caller's business
  // Context: refuse absolute names. ADD: strip the "/" as tar(1) does.
  bool strip_absolute = false;
  // Context: refuse devices, fifos and sockets. ADD: skip them.
  bool skip_special = false;
  // Owner of everything written: `chown` if set, else the tar's ids when
  // `keep_owners` (ADD), else root.
  bool keep_owners = false;
  std::optional<std::pair<uint32_t, uint32_t>> chown;
  const DockerIgnore* ignore = nullptr;  // context only
};

// Extracts the tar (plain, gzip, bzip2 or xz) read from `tar_fd` (from its
// current offset) into the directory `dest_fd`. Errors as UnpackContext;
// what was written before an error stays (the caller removes it).
Result<ContextStats> ExtractTar(int tar_fd, int dest_fd, const ExtractOptions& options);

// True if the file read from `fd` (from offset 0; the offset is restored to
// 0) is a tar archive, plain or compressed, by content: ADD's rule.
bool IsTarArchive(int fd);

// Sets the owner of `fd` itself (name null) or of `name` under the directory
// `fd` (never following a symlink), when kiln runs as root: a non-root test
// run cannot chown, and what it creates is its own anyway.
void ChownIfRoot(int fd, const char* name, uint32_t uid, uint32_t gid);

}  // namespace kiln::images::internal
