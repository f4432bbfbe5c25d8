// The Connect protocol's codec (see connect.h).
#include "api/e2b/envd/connect.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

namespace kiln::api::e2b::connect {

// What one Feed may add past a whole message: the server's body pieces are
// 64 KiB.
constexpr size_t kMaxPieceBytes = 64 << 10;

std::string_view ConnectCode(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidRequest:
    case Code::kInvalidArchive:
    case Code::kIsADirectory:
    case Code::kNotADirectory:
      return "invalid_argument";
    case Code::kNotSupported:
    case Code::kMethodNotAllowed:
      return "unimplemented";
    case Code::kUnauthorized:
      return "unauthenticated";
    case Code::kForbidden:
    case Code::kPermissionDenied:
      return "permission_denied";
    case Code::kPayloadTooLarge:
    case Code::kSpendingLimitReached:
    case Code::kQuotaExceeded:
    case Code::kRateLimited:
    case Code::kTooManyStreams:
    case Code::kNoSpace:
    case Code::kBudgetExceeded:
      return "resource_exhausted";
    case Code::kNotFound:
    case Code::kRouteNotFound:
    case Code::kSnapshotNotFound:
    case Code::kFileNotFound:
    case Code::kImageNotFound:
    case Code::kContextNotFound:
      return "not_found";
    case Code::kFileExists:
    case Code::kNameTaken:
    case Code::kContextExists:
    case Code::kSnapshotExists:
      return "already_exists";
    case Code::kDirectoryNotEmpty:
    case Code::kStdinClosed:
    case Code::kBusy:
    case Code::kNotPaused:
    case Code::kNotPausable:
    case Code::kContextDead:
    case Code::kBuildInProgress:
    case Code::kRequestInProgress:
    case Code::kIdempotencyKeyReused:
    case Code::kSnapshotIncompatible:
      return "failed_precondition";
    case Code::kNotRunning:
    case Code::kSandboxPaused:
    case Code::kShuttingDown:
    case Code::kNoCapacity:
    case Code::kPortClosed:
      return "unavailable";
    case Code::kAgentTimeout:
    case Code::kRequestTimeout:
      return "deadline_exceeded";
    default:
      return "internal";
  }
}

int HttpStatusOf(std::string_view c) {
  if (c == "invalid_argument" || c == "failed_precondition" || c == "out_of_range") return 400;
  if (c == "unauthenticated") return 401;
  if (c == "permission_denied") return 403;
  if (c == "not_found") return 404;
  if (c == "already_exists" || c == "aborted") return 409;
  if (c == "resource_exhausted") return 429;
  if (c == "canceled") return 499;
  if (c == "unimplemented") return 501;
  if (c == "unavailable") return 503;
  if (c == "deadline_exceeded") return 504;
  return 500;
}

std::string Protocol::ContentType() const {
  return std::string(streaming ? "application/connect+" : "application/") +
         (json ? "json" : "proto");
}

std::optional<Protocol> ParseContentType(std::string_view ct) {
  ct = ct.substr(0, ct.find(';'));
  while (!ct.empty() && ct.back() == ' ') ct.remove_suffix(1);
  std::string lower(ct);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (lower == "application/proto") return Protocol{false, false};
  if (lower == "application/json") return Protocol{false, true};
  if (lower == "application/connect+proto") return Protocol{true, false};
  if (lower == "application/connect+json") return Protocol{true, true};
  return std::nullopt;
}

Result<std::optional<int64_t>> ParseTimeoutMs(std::string_view header) {
  if (header.empty()) return std::optional<int64_t>();
  if (header.size() > 10 ||
      !std::all_of(header.begin(), header.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return Status(Code::kInvalidRequest, "Connect-Timeout-Ms must be 1 to 10 digits, not '" +
                                             std::string(header.substr(0, 32)) + "'");
  return std::optional<int64_t>(std::stoll(std::string(header)));
}

bool IdentityEncoding(std::string_view encoding) {
  return encoding.empty() || encoding == "identity";
}

std::string Envelope(uint8_t flags, std::string_view message) {
  std::string out;
  out.reserve(5 + message.size());
  uint32_t n = static_cast<uint32_t>(message.size());
  out.push_back(static_cast<char>(flags));
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((n >> shift) & 0xff));
  out.append(message);
  return out;
}

namespace {
nlohmann::json ErrorObject(const Status& s) {
  return nlohmann::json{{"code", ConnectCode(s.code())}, {"message", s.message()}};
}
}  // namespace

std::string EndStreamJson(const Status& status) {
  nlohmann::json body{{"metadata", nlohmann::json::object()}};
  if (!status.ok()) body["error"] = ErrorObject(status);
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ErrorJson(const Status& status) {
  return ErrorObject(status).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status EnvelopeReader::Feed(std::string_view bytes) {
  if (pos_ > 0) {  // drop what was taken before growing
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  // One whole message, its header and one more piece at most.
  if (buf_.size() + bytes.size() > max_message_ + 5 + kMaxPieceBytes)
    return Status(Code::kInvalidRequest, "envelopes were sent faster than they were read");
  buf_.append(bytes);
  return Status::Ok();
}

EnvelopeReader::Got EnvelopeReader::Next(uint8_t* flags, std::string* message, Status* error) {
  std::string_view rest(buf_);
  rest.remove_prefix(pos_);
  if (rest.size() < 5) return Got::kNeedMore;
  uint8_t f = static_cast<uint8_t>(rest[0]);
  uint32_t n = 0;
  for (int i = 1; i <= 4; ++i) n = (n << 8) | static_cast<uint8_t>(rest[i]);
  if (f & kFlagCompressed) {
    *error = Status(Code::kInvalidRequest,
                    "envelope is flagged compressed but the stream's encoding is identity");
    return Got::kError;
  }
  if (f & ~(kFlagCompressed | kFlagEndStream)) {
    *error = Status(
        Code::kInvalidRequest, "envelope has unknown flags 0x" + [f] {
          char b[8];
          std::snprintf(b, sizeof b, "%02x", f);
          return std::string(b);
        }());
    return Got::kError;
  }
  if (n > max_message_) {
    *error = Status(Code::kPayloadTooLarge, "envelope of " + std::to_string(n) +
                                                " bytes is over the limit of " +
                                                std::to_string(max_message_));
    return Got::kError;
  }
  if (rest.size() < 5 + static_cast<size_t>(n)) return Got::kNeedMore;
  *flags = f;
  message->assign(rest.substr(5, n));
  pos_ += 5 + n;
  return Got::kMessage;
}

Status EnvelopeReader::Finish() const {
  size_t left = buf_.size() - pos_;
  if (left == 0) return Status::Ok();
  return Status(Code::kInvalidRequest, "the stream ended inside an envelope (" +
                                           std::to_string(left) + " bytes of it came)");
}

Status Codec::Decode(std::string_view bytes, google::protobuf::Message* message) const {
  const std::string& type = message->GetDescriptor()->full_name();
  if (bytes.size() > kMaxMessageBytes)
    return Status(Code::kPayloadTooLarge,
                  type + " is over the limit of " + std::to_string(kMaxMessageBytes) + " bytes");
  if (json_) {
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;  // as envd: a newer client may send more
    auto st = google::protobuf::util::JsonStringToMessage(
        google::protobuf::StringPiece(bytes.data(), bytes.size()), message, options);
    if (!st.ok())
      return Status(Code::kInvalidRequest,
                    "the body is not a " + type + " in JSON: " + std::string(st.message()));
    return Status::Ok();
  }
  if (!message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return Status(Code::kInvalidRequest, "the body is not a " + type + " in protobuf binary");
  return Status::Ok();
}

std::string Codec::Encode(const google::protobuf::Message& message) const {
  std::string out;
  if (json_) {
    google::protobuf::util::JsonPrintOptions options;
    (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  } else {
    message.SerializeToString(&out);
  }
  return out;
}

}  // namespace kiln::api::e2b::connect
