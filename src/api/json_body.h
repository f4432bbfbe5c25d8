// A request body parsed as JSON, with the limits every API body shares.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/json_bounded.h"

namespace kiln::api {

// {} for a body of whitespace only. Throws ApiError 400 (field "body") for
// text that is not JSON or nests arrays/objects more than kMaxJsonDepth deep.
nlohmann::json ParseJsonBody(const std::string& body);

}  // namespace kiln::api
