#include "cli/context.h"

#include <cstdlib>

namespace kiln::cli {

ClientConfig config_from_env(const char* api_url, const char* api_key) {
  ClientConfig config;
  config.url = parse_api_url(api_url != nullptr && *api_url != '\0' ? api_url : kDefaultApiUrl);
  if (api_key != nullptr && *api_key != '\0') config.api_key = api_key;
  return config;
}

HttpClient& Context::http() {
  if (!http_) {
    ClientConfig config = config_from_env(std::getenv("KILN_API_URL"), std::getenv("KILN_API_KEY"));
    http_ = std::make_unique<HttpClient>(std::move(config.url), std::move(config.api_key));
  }
  return *http_;
}

}  // namespace kiln::cli
