// Standard base64 (RFC 4648, padded): exec output arrives base64-encoded so
// binary output survives, and stdin is sent as stdinBase64.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiln::cli {

std::string base64_encode(std::string_view bytes);

// nullopt on any character outside the alphabet or bad padding.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace kiln::cli
