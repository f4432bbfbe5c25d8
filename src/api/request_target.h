// The path and query of a request's target, percent-decoded by Boost.URL.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::api {

struct RequestTarget {
  // Percent-decoded; a '+' stays a '+' (only form-encoded queries use it
  // for a space).
  std::string path;
  // Name/value pairs in order, repeats kept, percent-decoded with '+' as a
  // space; a name without '=' has the value "".
  std::vector<std::pair<std::string, std::string>> query;
};

// Parses an origin-form target ("/path?query", RFC 9112 3.2.1). Throws
// ApiError 400 invalid_request for anything else, such as a '%' not
// followed by two hex digits or a character RFC 3986 does not allow there.
RequestTarget ParseRequestTarget(std::string_view target);

// `text` percent-encoded for a query value: everything but RFC 3986's
// unreserved characters.
std::string PercentEncode(std::string_view text);

}  // namespace kiln::api
