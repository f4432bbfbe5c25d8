// Daytona's errors and the front's dialect (see daytona.h). The SDK picks
// its exception by the body's (source, code) first, then by the status:
// 404 DaytonaNotFoundError, 429 DaytonaRateLimitError, 408 and 504
// DaytonaTimeoutError; a daemon's FILE_NOT_FOUND is its
// DaytonaFileNotFoundError.
#include "api/errors.h"
#include "api/daytona/daytona.h"
#include "api/front.h"
#include "common/time.h"

namespace kiln::api {
namespace daytona {

using nlohmann::json;

namespace {

// Daytona's code word for the errors its SDK tells apart, and the side
// that answers them: the toolbox's (DAYTONA_DAEMON) or the API's.
struct DaytonaCode {
  const char* code;
  const char* source;
};

DaytonaCode CodeOf(Code code) {
  switch (code) {
    case Code::kFileNotFound:
      return {"FILE_NOT_FOUND", "DAYTONA_DAEMON"};
    case Code::kPermissionDenied:
      return {"FILE_ACCESS_DENIED", "DAYTONA_DAEMON"};
    case Code::kAgentTimeout:
      return {"PROCESS_EXECUTION_TIMEOUT", "DAYTONA_DAEMON"};
    case Code::kNotFound:
    case Code::kSnapshotNotFound:
    case Code::kImageNotFound:
      return {"NOT_FOUND", "DAYTONA_API"};
    case Code::kRateLimited:
    case Code::kTooManyStreams:
      return {"TOO_MANY_REQUESTS", "DAYTONA_API"};
    case Code::kNoCapacity:
      return {"SERVICE_UNAVAILABLE", "DAYTONA_API"};
    case Code::kNotSupported:
      return {"NOT_IMPLEMENTED", "DAYTONA_API"};
    default:
      return {nullptr, "DAYTONA_API"};
  }
}

}  // namespace

int HttpStatus(Code code) {
  switch (code) {
    // Daytona answers 503 when it has no room; Retry-After says when.
    case Code::kNoCapacity:
      return 503;
    case Code::kNotSupported:
      return 501;
    // A command past its timeout: the SDK's DaytonaTimeoutError.
    case Code::kAgentTimeout:
      return 408;
    default:
      return api::HttpStatus(code);
  }
}

json ErrorBody(const Status& s, const std::string& path) {
  int status = HttpStatus(s.code());
  DaytonaCode dc = CodeOf(s.code());
  std::string code = dc.code ? dc.code : std::string(CodeName(s.code()));
  json body{
      {"statusCode", status},          {"message", s.message()}, {"code", code},
      {"source", dc.source},           {"path", path},           {"timestamp", FormatTime(NowMs())},
      {"kilnCode", CodeName(s.code())}};
  if (!s.details().is_null()) body["details"] = s.details();
  return body;
}

void SendError(Exchange& ex, const Status& s) {
  if (ex.responded()) return;  // a stream already began; it ends as it can
  int retry = s.retry_after_s() > 0 ? s.retry_after_s() : s.code() == Code::kNoCapacity ? 5 : 0;
  if (retry > 0) ex.extra_headers.emplace_back("Retry-After", std::to_string(retry));
  ex.SendJson(HttpStatus(s.code()), ErrorBody(s, ex.path()));
}

Status Unsupported(const std::string& feature, const std::string& why) {
  return Status(Code::kNotSupported, "kiln does not offer Daytona's " + feature + ": " + why,
                json{{"feature", feature}});
}

}  // namespace daytona

ApiFront::Dialect DaytonaDialect() {
  ApiFront::Dialect d;
  d.prefix = std::string(daytona::kPrefix) + "/";
  // The SDK sends the key as kiln's clients do: Authorization: Bearer.
  d.send_error = [](Exchange& ex, const Status& s) { daytona::SendError(ex, s); };
  return d;
}

}  // namespace kiln::api
