// String helpers that several layers need: ASCII case (HTTP header names,
// Dockerfile keywords, host names: never locale-dependent) and trimming
// blanks (spaces and tabs, as HTTP field values are trimmed).
#pragma once

#include <string>
#include <string_view>

namespace kiln {

inline std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

inline std::string AsciiUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

// `s` without the spaces and tabs at either end.
inline std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// `s` without the characters of `chars` at its start, its end, or both: for
// text whose blanks are more than spaces and tabs (a Dockerfile's words also
// part at '\r', '\v' and '\f'; a .dockerignore line drops a CRLF's '\r').
inline std::string_view TrimLeft(std::string_view s, std::string_view chars) {
  while (!s.empty() && chars.find(s.front()) != std::string_view::npos) s.remove_prefix(1);
  return s;
}
inline std::string_view TrimRight(std::string_view s, std::string_view chars) {
  while (!s.empty() && chars.find(s.back()) != std::string_view::npos) s.remove_suffix(1);
  return s;
}
inline std::string_view Trim(std::string_view s, std::string_view chars) {
  return TrimRight(TrimLeft(s, chars), chars);
}

}  // namespace kiln
