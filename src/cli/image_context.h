// The build context of `kiln image build DIR`: the folder packed exactly as
// the Python and TypeScript SDKs pack it, so one tree has one digest
// whichever client sends it and the daemon stores it once.
//
// Format: a ustar archive (libarchive's writer) of the folder's contents,
// entries sorted by path bytes, directories included, mtime 0, uid/gid 0,
// no user/group names, mode & 07777, symlinks kept as symlinks, paths
// matched by .dockerignore left out (.dockerignore and Dockerfile always
// kept; the rules are kiln::images::DockerIgnore, the matcher the builder
// itself uses); then one gzip member of stored deflate blocks (mtime 0, no name).
// Stored, not compressed: deflate output differs between zlib builds (Node
// bundles Chromium's), and identical bytes matter more than size here.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kiln::cli {

struct PackedContext {
  std::string bytes;   // the .tar.gz
  std::string digest;  // "sha256:<hex>" of `bytes`
};

// Packs `dir`. `dockerignore` (its text) replaces the folder's own
// .dockerignore when given. Errors name the path: not a directory,
// unreadable, a path or link target too long for ustar.
Result<PackedContext> PackContext(const std::string& dir,
                                  const std::optional<std::string>& dockerignore = std::nullopt);

// A gzip member of stored deflate blocks holding `data` (exposed for tests).
std::string StoredGzip(std::string_view data);

}  // namespace kiln::cli
