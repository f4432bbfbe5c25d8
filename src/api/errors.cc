#include "api/errors.h"

namespace kiln::api {

using nlohmann::json;

json ErrorBody(const ApiError& e, const std::string& request_id) {
  json err = {
      {"code", e.code}, {"status", e.status}, {"message", e.what()}, {"requestId", request_id}};
  if (!e.details.is_null()) err["details"] = e.details;
  if (e.retry_after_s > 0) err["retryAfterMs"] = e.retry_after_s * 1000;
  return json{{"error", err}};
}

ApiError NotFound(const std::string& what) {
  return ApiError(404, "not_found", what + " not found");
}

ApiError InvalidField(const std::string& path, const std::string& message) {
  return ApiError(400, "invalid_request", path + ": " + message,
                  json{{"issues", json::array({json{{"path", path}, {"message", message}}})}});
}

ApiError FromAgentError(const json& answer) {
  static const json kEmpty = json::object();
  const json& raw = answer.is_object() && answer.contains("error") ? answer["error"] : answer;
  // The agent runs in the sandbox: never trust the shape of what it sends.
  const json& e = raw.is_object() ? raw : kEmpty;
  std::string code = e.value("code", "internal_error");
  std::string message = e.value("message", "the sandbox failed the request");
  int status = 500;
  if (code == "file_not_found" || code == "not_found")
    status = 404;
  else if (code == "is_a_directory" || code == "not_a_directory" || code == "file_exists" ||
           code == "directory_not_empty" || code == "not_running" || code == "stdin_closed" ||
           code == "busy")
    status = 409;
  else if (code == "permission_denied")
    status = 403;
  else if (code == "invalid_request")
    status = 400;
  else if (code == "no_space")
    status = 507;
  else if (code == "agent_timeout")
    status = 504;
  json details = nullptr;
  if (e.contains("path")) details = json{{"path", e["path"]}};
  return ApiError(status, code, message, details);
}

}  // namespace kiln::api
