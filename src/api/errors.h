// API errors: thrown by handlers, turned into the standard error body
// {"error": {"code", "status", "message", "requestId", "details"?}}.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace kiln::api {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string code, std::string message, nlohmann::json details = nullptr)
      : std::runtime_error(message),
        status(status),
        code(std::move(code)),
        details(std::move(details)) {}

  int status;
  std::string code;
  nlohmann::json details;
  int retry_after_s = 0;
};

nlohmann::json ErrorBody(const ApiError& e, const std::string& request_id);

ApiError NotFound(const std::string& what);
ApiError InvalidField(const std::string& path, const std::string& message);

// An {"error": {...}} answer of the agent as an ApiError with a fitting
// HTTP status (file_not_found -> 404, is_a_directory -> 409, ...).
ApiError FromAgentError(const nlohmann::json& answer);

}  // namespace kiln::api
