// Small helpers the fuzz targets share (tests/fuzz; see docs/guide.md, "Fuzzing").
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "unit/support/temp_dir.h"

namespace kiln::fuzz {

// A fresh directory, removed when it goes: the unit tests' TempDir (it
// throws if it cannot be made), named kiln-fuzz-*.
class TempDir : public testutil::TempDir {
 public:
  TempDir() : testutil::TempDir("kiln-fuzz") {}
};

inline void ReplaceAll(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// Splits an input into parts at a separator line, so that one input can
// carry several files (a layout's index, manifest and config).
inline std::vector<std::string> SplitParts(std::string_view input, std::string_view separator) {
  std::vector<std::string> parts;
  for (;;) {
    size_t at = input.find(separator);
    parts.emplace_back(input.substr(0, at));
    if (at == std::string_view::npos) return parts;
    input.remove_prefix(at + separator.size());
  }
}

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace kiln::fuzz
