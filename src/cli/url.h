// The daemon address (KILN_API_URL) and request targets built on it.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::cli {

inline constexpr std::string_view kDefaultApiUrl = "http://127.0.0.1:7070";

struct ApiUrl {
  std::string host;       // without brackets for IPv6 literals
  std::string port;       // always set ("80" when the URL has none)
  std::string base_path;  // "" or "/prefix" (no trailing slash), prepended to every target
  std::string display;    // normalized "http://host:port/prefix", for messages

  std::string HostHeader() const;
};

// Accepts "http://host[:port][/prefix]" or "host[:port]". https is refused:
// the client speaks plain HTTP only. Throws UsageError naming KILN_API_URL.
ApiUrl ParseApiUrl(std::string_view text);

// RFC 3986 percent-encoding; only unreserved characters pass through.
std::string PercentEncode(std::string_view text);

// "?a=1&b=x%20y" (or "" when empty), keeping insertion order and repeats.
class Query {
 public:
  Query& Add(std::string_view key, std::string_view value);
  std::string Str() const;
  bool empty() const { return params_.empty(); }

 private:
  std::vector<std::pair<std::string, std::string>> params_;
};

// "/v1/sandboxes/<id><suffix>" with the id encoded, so an odd id cannot
// escape the path (suffix is trusted, e.g. ":stop" or "/processes").
std::string SandboxTarget(std::string_view id, std::string_view suffix = "");
// "/v1/keys/<id><suffix>", encoded the same way.
std::string KeyTarget(std::string_view id, std::string_view suffix = "");
// "/v1/snapshots/<id><suffix>", encoded the same way.
std::string SnapshotTarget(std::string_view id, std::string_view suffix = "");

}  // namespace kiln::cli
