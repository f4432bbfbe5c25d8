// Reading image requests: the body of POST /v1/images, and a `start` object.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "images/image_request.h"

namespace kiln::api {

// Throws ApiError (400 naming each field, 413 for a Dockerfile over 256 KiB).
images::ImageRequest ReadImageRequest(const nlohmann::json& body, const std::string& owner);
std::optional<images::StartSpec> ReadStart(const nlohmann::json* raw, const std::string& prefix);

}  // namespace kiln::api
