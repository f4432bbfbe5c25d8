// .dockerignore: which files of a build context the builder never sees.
//
// Docker's semantics (moby/patternmatcher), so a context behaves the same
// under kiln as under `docker build`: one pattern a line, "#" comments, blank
// lines skipped; each pattern is cleaned ("./a/" -> "a", a leading "/"
// dropped, since patterns are relative to the context root); Go's
// filepath.Match syntax (* ? [a-z] [^a-z] \escape, none crossing "/") plus
// "**" for any number of directories; "!" re-includes. The last pattern that
// matches a path decides, and a pattern matching a directory matches
// everything under it.
//
// Immutable after Parse; safe to share between threads.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kiln::images {

class DockerIgnore {
 public:
  DockerIgnore() = default;  // excludes nothing

  // kInvalidRequest ".dockerignore line N: bad pattern ..." (an unclosed
  // "[", a trailing "\", an empty "!") with details {"line": N}.
  static Result<DockerIgnore> Parse(std::string_view text);

  // `rel` is a context-relative path ("src/a.py"; a leading "/" or "./" is
  // ignored). Last matching pattern wins; "!" re-includes; a pattern matching
  // a directory excludes everything under it.
  bool Excluded(std::string_view rel) const;

  // True if some pattern starts with "!": an excluded directory may then
  // still hold included files, so a walk must not skip it.
  bool HasExceptions() const { return has_exceptions_; }

 private:
  struct Pattern {
    std::string glob;
    bool exception = false;  // "!pattern"
  };
  std::vector<Pattern> patterns_;
  bool has_exceptions_ = false;
};

// Go's filepath.Match on a whole "/"-separated path, plus "**" (any number of
// directories, including none). A malformed pattern matches nothing; use
// ValidGlob to check one first.
bool GlobMatch(std::string_view pattern, std::string_view path);
bool ValidGlob(std::string_view pattern);

}  // namespace kiln::images
