// Output text for JSON: commands print bytes, the API answers UTF-8.
#pragma once

#include <string>
#include <string_view>

namespace kiln::api {

// Length of the longest prefix of `s` that does not end inside a
// multi-byte UTF-8 sequence, so a stream never splits a character.
size_t CompleteUtf8Prefix(std::string_view s);

// `s` with every invalid byte sequence replaced by U+FFFD.
std::string SanitizeUtf8(std::string_view s);

}  // namespace kiln::api
