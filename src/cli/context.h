// Per-invocation state handed to every verb: output mode and the client,
// which is only built when a verb actually talks to the daemon.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cli/http_client.h"
#include "cli/url.h"

namespace kiln::cli {

struct ClientConfig {
  ApiUrl url;
  std::optional<std::string> api_key;
};

// KILN_API_URL / KILN_API_KEY values (null or empty = unset).
ClientConfig config_from_env(const char* api_url, const char* api_key);

class Context {
 public:
  explicit Context(bool json) : json_(json) {}

  bool json() const { return json_; }
  HttpClient& http();  // reads the environment on first use

 private:
  bool json_;
  std::unique_ptr<HttpClient> http_;
};

}  // namespace kiln::cli
