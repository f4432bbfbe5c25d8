// Standard base64 (RFC 4648, with padding), used for bytes inside JSON.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiln {

std::string Base64Encode(std::string_view in);
// Returns nullopt on a character outside the alphabet or bad padding.
std::optional<std::string> Base64Decode(std::string_view in);

}  // namespace kiln
