// kiln's own errors (errors.h).
#include "api/kiln/errors.h"

#include "api/auth.h"

namespace kiln::api::v1 {

using nlohmann::json;

void RequireAdmin(const Exchange& ex, const std::string& message) {
  if (!CallerOf(ex).admin) throw ApiError(Code::kForbidden, message);
}

ApiError PartialForkError(const Status& status, json started, int requested) {
  std::string counted = " (" + std::to_string(started.size()) + " of " + std::to_string(requested) +
                        " copies started)";
  json details = {{"started", std::move(started)}, {"requested", requested}};
  return ApiError(Status(status.code(), status.message() + counted, std::move(details))
                      .WithRetryAfter(status.retry_after_s()));
}

json StreamErrorJson(std::string_view code, std::string_view message) {
  return json{{"type", "error"}, {"error", {{"code", code}, {"message", message}}}};
}

json FailureJson(const Status& status) {
  return json{{"k", "failure"},
              {"code", CodeName(status.code())},
              {"message", status.message()},
              {"status", HttpStatus(status.code())}};
}

}  // namespace kiln::api::v1
