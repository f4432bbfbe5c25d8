#include "images/parse/dockerfile_lex.h"

#include <cctype>

#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace kiln::images::dockerfile_internal {
namespace {

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

Status LineError(int line, std::string message) {
  return Status(Code::kInvalidRequest,
                "Dockerfile line " + std::to_string(line) + ": " + std::move(message),
                {{"line", line}});
}

// "# key=value" at the top of the file: the key lower-cased and the value, or
// nullopt when the line is not shaped as a directive.
std::optional<std::pair<std::string, std::string>> AsDirective(std::string_view line) {
  line = TrimLeft(line, kWordSpace);
  if (line.empty() || line.front() != '#') return std::nullopt;
  line = TrimLeft(line.substr(1), kWordSpace);
  size_t k = 0;
  while (k < line.size() && (IsNameChar(line[k]))) ++k;
  if (k == 0) return std::nullopt;
  std::string key = AsciiLower(line.substr(0, k));
  std::string_view rest = TrimLeft(line.substr(k), kWordSpace);
  if (rest.empty() || rest.front() != '=') return std::nullopt;
  return std::make_pair(key, std::string(Trim(rest.substr(1), kWordSpace)));
}

// Strips a trailing escape char (plus trailing whitespace): true when the line continues.
bool StripContinuation(std::string_view* line, char escape) {
  std::string_view t = TrimRight(*line, kWordSpace);
  if (!t.empty() && t.back() == escape) {
    *line = t.substr(0, t.size() - 1);
    return true;
  }
  *line = t;
  return false;
}

}  // namespace

Result<Lines> SplitLines(std::string_view text) {
  std::vector<std::string_view> physical;
  for (size_t start = 0; start <= text.size();) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      if (start < text.size()) physical.push_back(text.substr(start));
      break;
    }
    physical.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }

  Lines out;
  size_t i = 0;
  // Directives: only before the first comment, blank line or instruction.
  bool seen_escape = false, seen_syntax = false;
  for (; i < physical.size(); ++i) {
    auto directive = AsDirective(physical[i]);
    if (!directive) break;
    const int line = static_cast<int>(i) + 1;
    auto& [key, value] = *directive;
    if (key == "escape") {
      if (seen_escape) return LineError(line, "only one escape parser directive can be used");
      seen_escape = true;
      if (value != "\\" && value != "`") {
        return LineError(line, "invalid escape '" + value + "': must be \\ or `");
      }
      out.escape = value[0];
    } else if (key == "syntax") {
      if (seen_syntax) return LineError(line, "only one syntax parser directive can be used");
      seen_syntax = true;  // kiln has one frontend: ignored
    } else if (key != "check") {
      break;  // an unknown directive is a comment, and ends the directives
    }
  }

  for (; i < physical.size(); ++i) {
    std::string_view first = TrimLeft(physical[i], kWordSpace);
    if (first.empty() || first.front() == '#') continue;
    LogicalLine logical{static_cast<int>(i) + 1, {}};
    bool more = StripContinuation(&first, out.escape);
    logical.text.append(first);
    while (more && i + 1 < physical.size()) {
      std::string_view next = physical[++i];
      std::string_view trimmed = TrimLeft(next, kWordSpace);
      if (trimmed.empty() || trimmed.front() == '#') continue;  // skipped inside continuations
      more = StripContinuation(&next, out.escape);
      logical.text.append(next);
    }
    logical.text = std::string(TrimRight(logical.text, kWordSpace));
    if (!logical.text.empty()) out.lines.push_back(std::move(logical));
  }
  return out;
}

Result<std::string> WordProcessor::Word(std::string_view text) const {
  Result<std::vector<std::string>> words = Process(text, false);
  if (!words.ok()) return words.status();
  return words->empty() ? std::string() : std::move(words->front());
}

Result<std::vector<std::string>> WordProcessor::Words(std::string_view text) const {
  return Process(text, true);
}

Result<std::vector<std::string>> WordProcessor::Process(std::string_view text, bool split) const {
  std::vector<std::string> words;
  std::string word;
  bool started = false;  // "" makes an empty word
  auto finish = [&] {
    if (started) words.push_back(std::move(word));
    word.clear();
    started = false;
  };
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    if (c == escape_) {
      started = true;
      if (i + 1 < text.size()) {
        word += text[i + 1];
        i += 2;
      } else {
        word += c;
        ++i;
      }
    } else if (c == '\'') {
      size_t close = text.find('\'', i + 1);
      if (close == std::string_view::npos) {
        return Status(Code::kInvalidRequest, "unterminated single quote");
      }
      word.append(text.substr(i + 1, close - i - 1));
      started = true;
      i = close + 1;
    } else if (c == '"') {
      started = true;
      ++i;
      bool closed = false;
      while (i < text.size()) {
        char d = text[i];
        if (d == '"') {
          closed = true;
          ++i;
          break;
        }
        if (d == escape_ && i + 1 < text.size()) {
          char e = text[i + 1];
          if (e != '"' && e != '$' && e != escape_) word += d;
          word += e;
          i += 2;
        } else if (d == '$') {
          if (Status s = Expand(text, &i, &word); !s.ok()) return s;
        } else {
          word += d;
          ++i;
        }
      }
      if (!closed) return Status(Code::kInvalidRequest, "unterminated double quote");
    } else if (c == '$') {
      started = true;
      if (Status s = Expand(text, &i, &word); !s.ok()) return s;
    } else if (split && (IsWordSpace(c) || c == '\n')) {
      finish();
      ++i;
    } else {
      started = true;
      word += c;
      ++i;
    }
  }
  if (split) {
    finish();
  } else {
    words.push_back(std::move(word));
  }
  return words;
}

// At text[*i] == '$': appends the expansion and moves *i past it.
Status WordProcessor::Expand(std::string_view text, size_t* i, std::string* out) const {
  size_t p = *i + 1;
  if (p >= text.size()) {
    *out += '$';
    *i = p;
    return Status::Ok();
  }
  if (text[p] != '{') {
    size_t end = p;
    while (end < text.size() && IsNameChar(text[end])) ++end;
    if (end == p || !IsNameStart(text[p])) {
      *out += '$';  // not a variable: a literal '$'
      *i = p;
      return Status::Ok();
    }
    *out += lookup_(text.substr(p, end - p)).value_or("");
    *i = end;
    return Status::Ok();
  }
  size_t name_start = p + 1, name_end = name_start;
  while (name_end < text.size() && IsNameChar(text[name_end])) ++name_end;
  std::string_view name = text.substr(name_start, name_end - name_start);
  if (name.empty() || !IsNameStart(name.front())) {
    return Status(Code::kInvalidRequest, "bad substitution: a variable name must follow '${'");
  }
  // The matching '}', counting nested braces and skipping escaped chars.
  size_t close = name_end;
  for (int depth = 1; close < text.size(); ++close) {
    if (text[close] == escape_) {
      ++close;
    } else if (text[close] == '{') {
      ++depth;
    } else if (text[close] == '}' && --depth == 0) {
      break;
    }
  }
  if (close >= text.size()) {
    return Status(Code::kInvalidRequest, "missing '}' in ${" + std::string(name));
  }
  std::optional<std::string> value = lookup_(name);
  *i = close + 1;
  if (name_end == close) {
    *out += value.value_or("");
    return Status::Ok();
  }
  std::string_view modifier = text.substr(name_end, close - name_end);
  bool colon = modifier.front() == ':';
  if (colon) modifier.remove_prefix(1);
  if (modifier.empty() ||
      (modifier.front() != '-' && modifier.front() != '+' && modifier.front() != '?')) {
    return Status(Code::kInvalidRequest, "unsupported modifier in ${" + std::string(name) +
                                             std::string(text.substr(name_end, close - name_end)) +
                                             "}: use :- :+ :? - + or ?");
  }
  char op = modifier.front();
  Result<std::string> word = Word(modifier.substr(1));
  if (!word.ok()) return word.status();
  bool set = colon ? (value && !value->empty()) : value.has_value();
  if (op == '-') {
    *out += set ? *value : *word;
  } else if (op == '+') {
    if (set) *out += *word;
  } else {  // '?'
    if (!set) {
      return Status(Code::kInvalidRequest,
                    std::string(name) + ": " + (word->empty() ? "is not set" : *word));
    }
    *out += *value;
  }
  return Status::Ok();
}

std::vector<Flag> ExtractFlags(std::string_view* rest) {
  std::vector<Flag> flags;
  while (true) {
    std::string_view s = TrimLeft(*rest, kWordSpace);
    if (!s.starts_with("--")) {
      *rest = s;
      return flags;
    }
    size_t end = 0;
    char quote = 0;
    for (; end < s.size(); ++end) {
      if (quote) {
        if (s[end] == quote) quote = 0;
      } else if (s[end] == '"' || s[end] == '\'') {
        quote = s[end];
      } else if (IsWordSpace(s[end])) {
        break;
      }
    }
    std::string_view word = s.substr(2, end - 2);
    *rest = s.substr(end);
    Flag flag;
    size_t eq = word.find('=');
    flag.name = std::string(word.substr(0, eq));
    if (eq != std::string_view::npos) {
      std::string_view value = word.substr(eq + 1);
      if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
          value.back() == value.front()) {
        value = value.substr(1, value.size() - 2);
      }
      flag.value = std::string(value);
    }
    flags.push_back(std::move(flag));
  }
}

bool HasHeredoc(std::string_view text) {
  for (size_t pos = text.find("<<"); pos != std::string_view::npos;
       pos = text.find("<<", pos + 2)) {
    if (pos > 0 && !IsWordSpace(text[pos - 1])) continue;
    size_t i = pos + 2;
    if (i < text.size() && text[i] == '-') ++i;
    if (i < text.size() && (text[i] == '"' || text[i] == '\'')) ++i;
    if (i < text.size() && (std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '_')) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> SplitRaw(std::string_view text, char escape) {
  std::vector<std::string> words;
  std::string word;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == escape && quote != '\'' && i + 1 < text.size()) {
      word += c;
      word += text[++i];
    } else if (quote) {
      if (c == quote) quote = 0;
      word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      word += c;
    } else if (IsWordSpace(c)) {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

size_t FindUnquotedEquals(std::string_view word, char escape) {
  char quote = 0;
  for (size_t i = 0; i < word.size(); ++i) {
    char c = word[i];
    if (c == escape && quote != '\'') {
      ++i;
    } else if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '=') {
      return i;
    }
  }
  return std::string_view::npos;
}

std::optional<std::vector<std::string>> ParseJsonArray(std::string_view text) {
  if (text.empty() || text.front() != '[') return std::nullopt;
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_array()) return std::nullopt;
  std::vector<std::string> out;
  for (const auto& item : parsed) {
    if (!item.is_string()) return std::nullopt;
    out.push_back(item.get<std::string>());
  }
  return out;
}

}  // namespace kiln::images::dockerfile_internal
