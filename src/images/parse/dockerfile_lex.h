// The lexical layer of the Dockerfile parser (dockerfile.h): parser directives,
// logical lines, an instruction's leading --flags, and shell-like words with
// variable expansion and quoting. Internal to kiln_images_parse; errors carry
// a bare message that the parser (dockerfile_parser.h) prefixes with the line.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace kiln::images::dockerfile_internal {

// What separates the words of a line: blanks, '\r', '\v' and '\f' (a
// newline ends the line instead).
inline constexpr std::string_view kWordSpace = " \t\r\v\f";
inline bool IsWordSpace(char c) { return kWordSpace.find(c) != std::string_view::npos; }

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

// `word` in single quotes, as messages show a word as written.
inline std::string Quote(std::string_view word) { return "'" + std::string(word) + "'"; }

// True for one or more ASCII digits (a stage index, a port).
inline bool AllDigits(std::string_view s) {
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return !s.empty();
}

// One of an instruction's leading "--name[=value]" words (RUN --network=none);
// quotes around the value are removed, nothing is expanded.
struct Flag {
  std::string name;
  std::optional<std::string> value;
};
// The flags at the start of *rest; *rest is left at the first other word.
std::vector<Flag> ExtractFlags(std::string_view* rest);

// True if `text` holds a heredoc start (<<EOF, <<-EOF, <<"EOF") at the start
// of a word: kiln refuses heredocs rather than run them as shell text.
bool HasHeredoc(std::string_view text);

// Splits at unquoted whitespace without processing (ENV/LABEL's k=v words).
std::vector<std::string> SplitRaw(std::string_view text, char escape);
// The first '=' outside quotes and not escaped, or npos.
size_t FindUnquotedEquals(std::string_view word, char escape);
// A JSON array of strings (exec form), or nullopt when `text` is not one.
std::optional<std::vector<std::string>> ParseJsonArray(std::string_view text);

}  // namespace kiln::images::dockerfile_internal
