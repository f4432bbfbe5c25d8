// The build context of `kiln image build DIR`: the folder packed exactly as
// the Python and TypeScript SDKs pack it, so one tree has one digest
// whichever client sends it and the daemon stores it once.
//
// Format: a ustar archive (libarchive's writer) of the folder's contents,
// entries sorted by path bytes, directories included, mtime 0, uid/gid 0,
// no user/group names, mode & 07777, symlinks kept as symlinks, paths
// matched by .dockerignore left out (.dockerignore and Dockerfile always
// kept); then one gzip member of stored deflate blocks (mtime 0, no name).
// Stored, not compressed: deflate output differs between zlib builds (Node
// bundles Chromium's), and identical bytes matter more than size here.
#pragma once

#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kiln::cli {

// The rules of a .dockerignore with Docker's semantics: the last matching
// line wins, "!" re-includes, "*" and "?" stay inside one path part, "**"
// spans parts, and a pattern matching a directory matches its contents.
class DockerIgnore {
 public:
  // An invalid pattern is kInvalidRequest naming the line.
  static Result<DockerIgnore> Parse(std::string_view text);

  // `rel` is '/'-separated and relative to the context folder.
  bool Excluded(std::string_view rel) const;
  // With a "!" rule, an excluded directory is still walked (a file in it
  // may come back).
  bool has_negation() const { return has_negation_; }

 private:
  struct Rule {
    bool negate;
    std::regex pattern;
  };
  std::vector<Rule> rules_;
  bool has_negation_ = false;
};

// The regular expression (ECMAScript) a Docker pattern becomes.
std::string DockerPatternRegex(std::string_view pattern);

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
