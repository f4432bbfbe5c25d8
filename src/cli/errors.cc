#include "cli/errors.h"

#include <utility>

namespace kiln::cli {

ApiError::ApiError(unsigned status, std::string code, std::string message, nlohmann::json body)
    : std::runtime_error(std::move(message)),
      status(status),
      code(std::move(code)),
      body(std::move(body)) {}

UnreachableError::UnreachableError(std::string url)
    : std::runtime_error("cannot reach the kiln daemon at " + url + " (is `kiln server` running?)"),
      url(std::move(url)) {}

ClientError::ClientError(std::string code, std::string message)
    : std::runtime_error(std::move(message)), code(std::move(code)) {}

Interrupted::Interrupted(int signal) : std::runtime_error("interrupted"), signal(signal) {}

ApiError MakeApiError(unsigned status, std::string_view body) {
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.contains("error") && parsed["error"].is_object()) {
    const auto& e = parsed["error"];
    std::string code = e.value("code", "");
    std::string message = e.value("message", "");
    if (code.empty()) code = "http_" + std::to_string(status);
    if (message.empty()) message = "the daemon answered HTTP " + std::to_string(status);
    return ApiError(status, std::move(code), std::move(message), std::move(parsed));
  }
  // Not our shape: keep a short excerpt so the user sees what came back.
  std::string code = "http_" + std::to_string(status);
  std::string message = "the daemon answered HTTP " + std::to_string(status);
  std::string excerpt(body.substr(0, 200));
  while (!excerpt.empty() && (excerpt.back() == '\n' || excerpt.back() == '\r')) excerpt.pop_back();
  if (!excerpt.empty()) message += ": " + excerpt;
  nlohmann::json synthesized = {
      {"error", {{"code", code}, {"status", status}, {"message", message}}}};
  return ApiError(status, code, message, std::move(synthesized));
}

}  // namespace kiln::cli
