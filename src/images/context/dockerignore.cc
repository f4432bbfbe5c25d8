#include "images/context/dockerignore.h"

#include <cstdint>

#include "common/strings.h"
#include "images/parse/image_path.h"

namespace kiln::images {
namespace {

// Parses the class starting at p[i] == '[' (Go's filepath.Match rules: "^"
// negates, ranges "a-z", "\" escapes, "]" closes unless first). Sets *end to
// the index after "]" and *hit to whether `c` is in the class; false if the
// class is malformed.
bool ParseClass(std::string_view p, size_t i, unsigned char c, size_t* end, bool* hit) {
  ++i;
  bool negated = false;
  if (i < p.size() && p[i] == '^') {
    negated = true;
    ++i;
  }
  // One possibly escaped class character; false on "-", "]" or the end.
  auto esc = [&](unsigned char* out) {
    if (i >= p.size() || p[i] == '-' || p[i] == ']') return false;
    if (p[i] == '\\') {
      if (++i >= p.size()) return false;
    }
    *out = static_cast<unsigned char>(p[i++]);
    return true;
  };
  bool matched = false;
  int ranges = 0;
  for (;;) {
    if (i < p.size() && p[i] == ']' && ranges > 0) {
      ++i;
      break;
    }
    unsigned char lo, hi;
    if (!esc(&lo)) return false;
    hi = lo;
    if (i < p.size() && p[i] == '-') {
      ++i;
      if (!esc(&hi)) return false;
    }
    if (lo <= c && c <= hi) matched = true;
    ++ranges;
  }
  *end = i;
  *hit = matched != negated;
  return true;
}

// Bytes in the UTF-8 sequence starting s[0] ("?" matches one character).
size_t CharLen(std::string_view s) {
  size_t n = 1;
  while (n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) ++n;
  return n;
}

// Memoized over (pattern index, path index) so patterns like "*a*a*a*b" or
// "**/**/**/x" stay polynomial: .dockerignore files arrive from API users.
class Matcher {
 public:
  Matcher(std::string_view p, std::string_view s)
      : p_(p), s_(s), memo_((p.size() + 1) * (s.size() + 1), -1) {}
  bool Run() { return At(0, 0); }

 private:
  bool At(size_t i, size_t j) {
    int8_t& m = memo_[i * (s_.size() + 1) + j];
    if (m < 0) m = Step(i, j) ? 1 : 0;
    return m == 1;
  }

  bool Step(size_t i, size_t j) {
    if (i == p_.size()) return j == s_.size();
    char c = p_[i];
    if (c == '*') {
      if (i + 1 < p_.size() && p_[i + 1] == '*') {
        size_t rest = i + 2;
        if (rest == p_.size()) return true;  // trailing "**": everything
        if (p_[rest] == '/') {
          // "**/": zero or more whole directories.
          for (size_t k = j; k <= s_.size(); ++k) {
            if ((k == j || s_[k - 1] == '/') && At(rest + 1, k)) return true;
          }
          return false;
        }
        for (size_t k = j; k <= s_.size(); ++k) {
          if (At(rest, k)) return true;
        }
        return false;
      }
      for (size_t k = j;; ++k) {
        if (At(i + 1, k)) return true;
        if (k == s_.size() || s_[k] == '/') return false;
      }
    }
    if (j == s_.size()) return false;
    if (c == '?') return s_[j] != '/' && At(i + 1, j + CharLen(s_.substr(j)));
    if (c == '[') {
      size_t end;
      bool hit;
      return ParseClass(p_, i, static_cast<unsigned char>(s_[j]), &end, &hit) && hit &&
             At(end, j + 1);
    }
    if (c == '\\') {
      if (++i == p_.size()) return false;
      c = p_[i];
    }
    return s_[j] == c && At(i + 1, j + 1);
  }

  std::string_view p_, s_;
  std::vector<int8_t> memo_;
};

// What a pattern line is trimmed of: blanks and a CRLF file's '\r'.
constexpr std::string_view kPatternBlanks = " \t\r";

}  // namespace

bool ValidGlob(std::string_view p) {
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\') {
      if (++i == p.size()) return false;
    } else if (p[i] == '[') {
      size_t end;
      bool hit;
      if (!ParseClass(p, i, 'a', &end, &hit)) return false;
      i = end - 1;
    }
  }
  return true;
}

bool GlobMatch(std::string_view pattern, std::string_view path) {
  return Matcher(pattern, path).Run();
}

Result<DockerIgnore> DockerIgnore::Parse(std::string_view text) {
  DockerIgnore ignore;
  int line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (!line.empty() && line.front() == '#') continue;
    line = Trim(line, kPatternBlanks);
    if (line.empty()) continue;
    Pattern pattern;
    if (line.front() == '!') {
      pattern.exception = true;
      line = Trim(line.substr(1), kPatternBlanks);
    }
    auto bad = [&](std::string_view why) {
      return Status(Code::kInvalidRequest,
                    ".dockerignore line " + std::to_string(line_no) + ": bad pattern \"" +
                        std::string(line) + "\" (" + std::string(why) + ")",
                    {{"line", line_no}});
    };
    if (line.empty()) return bad("nothing after \"!\"");
    if (!ValidGlob(line)) return bad("unclosed \"[\" or trailing \"\\\"");
    // Relative to the context root either way: "/a/./b/" and "a/b" are one pattern.
    pattern.glob = CleanPath(line).substr(1);
    ignore.has_exceptions_ = ignore.has_exceptions_ || pattern.exception;
    ignore.patterns_.push_back(std::move(pattern));
  }
  return ignore;
}

bool DockerIgnore::Excluded(std::string_view rel) const {
  if (patterns_.empty()) return false;
  std::string path = CleanPath(rel).substr(1);
  if (path.empty()) return false;  // the context root itself
  bool excluded = false;
  for (const Pattern& pattern : patterns_) {
    bool match = GlobMatch(pattern.glob, path);
    // A pattern naming a directory covers what is under it.
    for (size_t k = path.find('/'); !match && k != std::string::npos; k = path.find('/', k + 1)) {
      match = GlobMatch(pattern.glob, std::string_view(path).substr(0, k));
    }
    if (match) excluded = !pattern.exception;
  }
  return excluded;
}

}  // namespace kiln::images
