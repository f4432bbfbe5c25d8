// A request body parsed as JSON, with the limits every API body shares.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kiln::api {

// No API body needs deep nesting, and a deep one would overflow the stack
// of anything that walks it recursively (dump, comparisons).
inline constexpr int kMaxJsonDepth = 64;

// {} for a body of whitespace only. Throws ApiError 400 (field "body") for
// text that is not JSON or nests arrays/objects more than kMaxJsonDepth deep.
nlohmann::json ParseJsonBody(const std::string& body);

}  // namespace kiln::api
