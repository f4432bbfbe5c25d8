#include "api/utf8.h"

namespace kiln::api {
namespace {

// Length of the sequence a lead byte announces; 0 if not a lead byte.
int SeqLen(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

bool IsCont(unsigned char c) { return (c & 0xC0) == 0x80; }

}  // namespace

size_t CompleteUtf8Prefix(std::string_view s) {
  // Look back at most 3 bytes for a lead byte whose sequence is cut off.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
    if (IsCont(c)) continue;
    int len = SeqLen(c);
    if (len > static_cast<int>(back)) return s.size() - back;
    break;
  }
  return s.size();
}

std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int len = SeqLen(c);
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) ok = IsCont(static_cast<unsigned char>(s[i + k]));
    if (ok && len == 3) {
      unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0))
        ok = false;  // overlong, surrogates
    }
    if (ok && len == 4) {
      unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 >= 0x90)) ok = false;
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

}  // namespace kiln::api
