#include "common/status.h"

#include <array>
#include <cerrno>
#include <cstring>

namespace kiln {

namespace {

struct Named {
  Code code;
  std::string_view name;
};

constexpr std::array kNames = {
    Named{Code::kOk, "ok"},
    Named{Code::kInvalidRequest, "invalid_request"},
    Named{Code::kPayloadTooLarge, "payload_too_large"},
    Named{Code::kInvalidArchive, "invalid_archive"},
    Named{Code::kNotSupported, "not_supported"},
    Named{Code::kUnauthorized, "unauthorized"},
    Named{Code::kForbidden, "forbidden"},
    Named{Code::kSpendingLimitReached, "spending_limit_reached"},
    Named{Code::kNotFound, "not_found"},
    Named{Code::kRouteNotFound, "route_not_found"},
    Named{Code::kMethodNotAllowed, "method_not_allowed"},
    Named{Code::kSnapshotNotFound, "snapshot_not_found"},
    Named{Code::kFileNotFound, "file_not_found"},
    Named{Code::kImageNotFound, "image_not_found"},
    Named{Code::kContextNotFound, "context_not_found"},
    Named{Code::kNotRunning, "not_running"},
    Named{Code::kIsADirectory, "is_a_directory"},
    Named{Code::kNotADirectory, "not_a_directory"},
    Named{Code::kFileExists, "file_exists"},
    Named{Code::kDirectoryNotEmpty, "directory_not_empty"},
    Named{Code::kStdinClosed, "stdin_closed"},
    Named{Code::kBusy, "busy"},
    Named{Code::kPortClosed, "port_closed"},
    Named{Code::kPermissionDenied, "permission_denied"},
    Named{Code::kSnapshotCorrupted, "snapshot_corrupted"},
    Named{Code::kBudgetExceeded, "budget_exceeded"},
    Named{Code::kIdempotencyKeyReused, "idempotency_key_reused"},
    Named{Code::kRequestInProgress, "request_in_progress"},
    Named{Code::kBuildInProgress, "build_in_progress"},
    Named{Code::kSandboxPaused, "sandbox_paused"},
    Named{Code::kNotPaused, "not_paused"},
    Named{Code::kNotPausable, "not_pausable"},
    Named{Code::kNameTaken, "name_taken"},
    Named{Code::kContextExists, "context_exists"},
    Named{Code::kContextDead, "context_dead"},
    Named{Code::kSnapshotExists, "snapshot_exists"},
    Named{Code::kSnapshotIncompatible, "snapshot_incompatible"},
    Named{Code::kNoCapacity, "no_capacity"},
    Named{Code::kQuotaExceeded, "quota_exceeded"},
    Named{Code::kShuttingDown, "shutting_down"},
    Named{Code::kNoSpace, "insufficient_storage"},
    Named{Code::kRateLimited, "rate_limited"},
    Named{Code::kTooManyStreams, "too_many_streams"},
    Named{Code::kRequestTimeout, "request_timeout"},
    Named{Code::kAgentTimeout, "agent_timeout"},
    Named{Code::kStartupFailed, "startup_failed"},
    Named{Code::kRegistryError, "registry_error"},
    Named{Code::kInvalidImage, "invalid_image"},
    Named{Code::kSnapshotFailed, "snapshot_failed"},
    Named{Code::kUploadIncomplete, "upload_incomplete"},
    Named{Code::kIoError, "io_error"},
    Named{Code::kInternal, "internal_error"},
};

}  // namespace

std::string_view CodeName(Code code) {
  for (const auto& n : kNames)
    if (n.code == code) return n.name;
  return "internal_error";
}

std::optional<Code> CodeFromName(std::string_view name) {
  for (const auto& n : kNames)
    if (n.name == name) return n.code;
  // The agent's name before the rename: a sandbox restored from an older
  // snapshot may still run an agent that says it.
  if (name == "no_space") return Code::kNoSpace;
  return std::nullopt;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(CodeName(code_)) + ": " + message_;
}

Status FsError(std::string_view what, const std::string& path, int err) {
  return Status(err == ENOSPC || err == EDQUOT ? Code::kNoSpace : Code::kIoError,
                std::string(what) + " " + path + ": " + std::strerror(err), {{"path", path}});
}

}  // namespace kiln
