// JSON from outside kilnd (a request, an agent's answer, a registry's
// manifest, an imported archive's manifest) parsed with a depth limit.
//
// nlohmann's parser is iterative, but copying, comparing and dumping a value
// recurse: an answer nested a million deep would overflow the stack of
// whatever walks it next. Nothing kiln reads from outside needs more than a
// few levels, so anything deeper is refused as it is parsed, before a
// single deep value is built.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln {

inline constexpr int kMaxJsonDepth = 64;

// The value, or nullopt with *why set ("is not valid JSON", "is nested more
// than 64 deep") when `text` is not JSON or nests arrays and objects deeper
// than max_depth.
std::optional<nlohmann::json> ParseJsonBounded(std::string_view text, std::string* why = nullptr,
                                               int max_depth = kMaxJsonDepth);

}  // namespace kiln
