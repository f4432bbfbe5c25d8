// API errors: a kiln::Status thrown by handlers to unwind them, and the one
// place where a Status code becomes an HTTP status and the standard error
// body {"error": {"code", "status", "message", "requestId", "details"?}}.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace kiln::api {

class ApiError : public std::runtime_error {
 public:
  explicit ApiError(Status status)
      : std::runtime_error(status.message()), status_(std::move(status)) {}
  ApiError(Code code, std::string message, nlohmann::json details = nullptr)
      : ApiError(Status(code, std::move(message), std::move(details))) {}

  const Status& status() const { return status_; }
  int http_status() const;

 private:
  Status status_;
};

// The HTTP status that answers a code (kNotFound -> 404, kNoCapacity -> 409).
int HttpStatus(Code code);

nlohmann::json ErrorBody(const Status& status, const std::string& request_id);

// Throws the status unless it is OK; the value of a Result otherwise.
inline void ThrowIfError(const Status& s) {
  if (!s.ok()) throw ApiError(s);
}
template <typename T>
T ValueOrThrow(Result<T> r) {
  if (!r.ok()) throw ApiError(r.status());
  return std::move(r).value();
}

ApiError NotFound(const std::string& what);
ApiError InvalidField(const std::string& path, const std::string& message);

}  // namespace kiln::api
