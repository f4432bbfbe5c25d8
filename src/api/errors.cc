#include "api/errors.h"

namespace kiln::api {

using nlohmann::json;

int HttpStatus(Code code) {
  switch (code) {
    case Code::kOk:
      return 200;
    case Code::kInvalidRequest:
    case Code::kInvalidArchive:
    case Code::kNotSupported:
    case Code::kInvalidImage:
      return 400;
    case Code::kUnauthorized:
      return 401;
    case Code::kSpendingLimitReached:
      return 402;
    case Code::kForbidden:
    case Code::kPermissionDenied:
      return 403;
    case Code::kNotFound:
    case Code::kRouteNotFound:
    case Code::kSnapshotNotFound:
    case Code::kFileNotFound:
    case Code::kImageNotFound:
    case Code::kContextNotFound:
      return 404;
    case Code::kMethodNotAllowed:
      return 405;
    case Code::kNotRunning:
    case Code::kIsADirectory:
    case Code::kNotADirectory:
    case Code::kFileExists:
    case Code::kDirectoryNotEmpty:
    case Code::kStdinClosed:
    case Code::kBusy:
    case Code::kSnapshotCorrupted:
    case Code::kBudgetExceeded:
    case Code::kRequestInProgress:
    case Code::kBuildInProgress:
    case Code::kSandboxPaused:
    case Code::kNotPaused:
    case Code::kNotPausable:
    case Code::kNameTaken:
    case Code::kContextExists:
    case Code::kContextDead:
    case Code::kSnapshotExists:
    case Code::kSnapshotIncompatible:
    case Code::kNoCapacity:
    case Code::kQuotaExceeded:
      return 409;
    case Code::kPayloadTooLarge:
      return 413;
    case Code::kIdempotencyKeyReused:
      return 422;
    case Code::kRequestTimeout:
      return 408;
    case Code::kRateLimited:
    case Code::kTooManyStreams:
      return 429;
    case Code::kShuttingDown:
      return 503;
    case Code::kAgentTimeout:
      return 504;
    case Code::kRegistryError:
    case Code::kPortClosed:
      return 502;
    case Code::kNoSpace:
      return 507;
    case Code::kStartupFailed:
    case Code::kSnapshotFailed:
    case Code::kUploadIncomplete:
    case Code::kIoError:
    case Code::kInternal:
      return 500;
  }
  return 500;
}

int ApiError::http_status() const { return HttpStatus(status_.code()); }

json ErrorBody(const Status& s, const std::string& request_id) {
  json err = {{"code", CodeName(s.code())},
              {"status", HttpStatus(s.code())},
              {"message", s.message()},
              {"requestId", request_id}};
  if (!s.details().is_null()) err["details"] = s.details();
  if (s.retry_after_s() > 0) err["retryAfterMs"] = s.retry_after_s() * 1000;
  return json{{"error", err}};
}

ApiError NotFound(const std::string& what) {
  return ApiError(Code::kNotFound, what + " not found");
}

ApiError InvalidField(const std::string& path, const std::string& message) {
  return ApiError(Code::kInvalidRequest, path + ": " + message,
                  json{{"issues", json::array({json{{"path", path}, {"message", message}}})}});
}

}  // namespace kiln::api
