// The lexical layer of the Dockerfile parser (dockerfile.h): parser directives,
// logical lines, and shell-like words with variable expansion. Internal to
// kiln_images_parse; errors carry a bare message that dockerfile.cc prefixes
// with the line.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace kiln::images::dockerfile_internal {

// One instruction: its first physical line and its text with continuations
// joined (escape char and newline removed, comment lines inside skipped).
struct LogicalLine {
  int line = 0;
  std::string text;
};

struct Lines {
  char escape = '\\';  // from `# escape=`, else '\'
  std::vector<LogicalLine> lines;
};

// Reads the directives at the top and splits the rest into instructions.
// The error's details hold {"line": N}.
Result<Lines> SplitLines(std::string_view text);

// A variable's value, or nullopt when it is not set.
using Lookup = std::function<std::optional<std::string>(std::string_view name)>;

// Shell-like word processing as BuildKit's lexer does it: quotes removed ('..'
// literal, ".." expanding), the escape char making the next char literal, and
// $VAR / ${VAR...} expanded through `lookup`.
class WordProcessor {
 public:
  WordProcessor(char escape, Lookup lookup) : escape_(escape), lookup_(std::move(lookup)) {}
  // The whole text as one word (whitespace kept).
  Result<std::string> Word(std::string_view text) const;
  // The text split at unquoted whitespace, each word processed.
  Result<std::vector<std::string>> Words(std::string_view text) const;

 private:
  Result<std::vector<std::string>> Process(std::string_view text, bool split) const;
  Status Expand(std::string_view text, size_t* i, std::string* out) const;
  char escape_;
  Lookup lookup_;
};

// Splits at unquoted whitespace without processing (ENV/LABEL's k=v words).
std::vector<std::string> SplitRaw(std::string_view text, char escape);
// The first '=' outside quotes and not escaped, or npos.
size_t FindUnquotedEquals(std::string_view word, char escape);
// A JSON array of strings (exec form), or nullopt when `text` is not one.
std::optional<std::vector<std::string>> ParseJsonArray(std::string_view text);

}  // namespace kiln::images::dockerfile_internal
