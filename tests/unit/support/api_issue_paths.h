// The field paths of an invalid_request error's issues, in order: what the
// fronts' body-reader tests compare.
#pragma once

#include <string>
#include <vector>

#include "api/errors.h"

namespace kiln::api {

inline std::vector<std::string> IssuePaths(const ApiError& e) {
  std::vector<std::string> out;
  for (const auto& i : e.status().details().value("issues", nlohmann::json::array()))
    out.push_back(i.value("path", ""));
  return out;
}

}  // namespace kiln::api
