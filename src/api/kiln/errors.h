// kiln's own front: its errors. They answer in the API's standard shape,
// {"error": {"code", "status", "message", "requestId", "details"?}}
// (api/errors.h), which is ApiFront's default: kiln's front adds no
// Dialect and wraps no route. What is its own is here: the refusals the
// front itself makes, and how an error reads once a streamed answer began
// (its 200 is gone, so the error is the stream's last line).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/errors.h"
#include "api/http_server.h"
#include "common/status.h"

namespace kiln::api::v1 {

// 403 forbidden, saying `message`, unless the caller holds an admin key.
void RequireAdmin(const Exchange& ex, const std::string& message);

// A fork that started only some of its `requested` copies: the failure,
// "(N of M copies started)", with the copies that did start (`started`,
// SandboxInfo objects) in its details so the caller can use or stop them.
ApiError PartialForkError(const Status& status, nlohmann::json started, int requested);

// The last line of an NDJSON stream that failed after its 200 (exec, a
// build log) and the terminal's error frame:
// {"type": "error", "error": {"code", "message"}}.
nlohmann::json StreamErrorJson(std::string_view code, std::string_view message);
// A failure among {"k": ...} events (an interpreter run's stream, a
// watch's follow): {"k": "failure", code, message, status (the HTTP one)}.
nlohmann::json FailureJson(const Status& status);

}  // namespace kiln::api::v1
