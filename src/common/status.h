// kiln's one error type, after LevelDB's Status and absl::Status: a code
// from a closed list, a message for people and optional details for
// programs. Every layer returns it for expected failures (Result<T> when
// there is a value); only src/api turns a code into an HTTP status.
//
// The codes are the API's documented error names (docs/api.md), because a
// failure deep in the control plane (a snapshot that is not found, a host
// that is full) reaches the client under exactly that name.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

namespace kiln {

enum class Code {
  kOk,
  // The request is wrong: a field, a path, a value.
  kInvalidRequest,
  kPayloadTooLarge,
  kInvalidArchive,
  kNotSupported,  // a reference feature kiln does not offer on one host
  // Who may do what.
  kUnauthorized,
  kForbidden,
  kSpendingLimitReached,
  // Something named does not exist.
  kNotFound,
  kRouteNotFound,
  kMethodNotAllowed,
  kSnapshotNotFound,
  kFileNotFound,
  kImageNotFound,
  kContextNotFound,  // an interpreter context
  // The state forbids it now.
  kNotRunning,
  kIsADirectory,
  kNotADirectory,
  kFileExists,
  kDirectoryNotEmpty,
  kStdinClosed,
  kPortClosed,  // nothing listens on the sandbox's port
  kBusy,
  kPermissionDenied,
  kSnapshotCorrupted,
  kBudgetExceeded,
  kIdempotencyKeyReused,
  kRequestInProgress,
  kBuildInProgress,  // the image is still being built
  kSandboxPaused,    // paused and autoWake is off
  kNotPaused,
  kNotPausable,
  kNameTaken,  // details.sandboxId names the holder
  // An interpreter context: one by that id runs; its kernel ended.
  kContextExists,
  kContextDead,
  // An imported snapshot's id is here already, another key's or other files.
  kSnapshotExists,
  // An imported snapshot needs another runsc version or base image.
  kSnapshotIncompatible,
  // Room: clears on its own; retry_after_s says when to try again.
  kNoCapacity,
  kQuotaExceeded,
  kShuttingDown,
  kNoSpace,
  // Too much at once from one caller: clears as the caller slows down.
  kRateLimited,     // over its key's (or address's) requests per second
  kTooManyStreams,  // a sandbox's long-lived streams are at their cap
  kRequestTimeout,  // the request's headers or body did not arrive in time
  // Something broke.
  kAgentTimeout,
  kStartupFailed,
  // A registry could not be reached, refused, or sent something invalid.
  kRegistryError,
  kInvalidImage,  // an image's manifest, config or layer is malformed or corrupted
  kSnapshotFailed,
  kUploadIncomplete,
  kIoError,
  kInternal,
};

// The API's name of a code ("snapshot_not_found"), and back (nullopt if
// unknown: the agent runs in the sandbox, so its names are not trusted).
std::string_view CodeName(Code code);
std::optional<Code> CodeFromName(std::string_view name);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(Code code, std::string message, nlohmann::json details = nullptr)
      : code_(code), message_(std::move(message)), details_(std::move(details)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // Structured facts for programs ({"path": ...}, {"issues": [...]}), or null.
  const nlohmann::json& details() const { return details_; }
  // For conditions that clear on their own (capacity): when to retry.
  int retry_after_s() const { return retry_after_s_; }
  Status& WithRetryAfter(int seconds) {
    retry_after_s_ = seconds;
    return *this;
  }

  // "snapshot_not_found: snapshot X not found", for logs.
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
  nlohmann::json details_;
  int retry_after_s_ = 0;
};

// A value or the Status saying why there is none (absl::StatusOr's shape).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit, as StatusOr
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: must not be OK

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

// A file system call that failed with errno `err` on `path`: kNoSpace for a
// full disk (ENOSPC, EDQUOT), else kIoError; "<what> <path>: <strerror>",
// details {"path": path}.
Status FsError(std::string_view what, const std::string& path, int err);

}  // namespace kiln
