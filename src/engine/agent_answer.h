// An agent's answer as a Result: the op's answer decoded (src/proto/ops.h),
// or the Status its error answer names. The agent runs inside the sandbox,
// so nothing it sends is trusted: a code kilnd does not know is an internal
// error, and an answer that does not decode is one too.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "proto/ops.h"

namespace kiln::engine {

// {"error": {code, message, path?}} (or the bare inner object) as a Status:
// file_not_found, is_a_directory, ...; a path goes to details.
Status StatusFromAgentError(const nlohmann::json& answer);
// The reverse, for agents that live in-process (fakes).
proto::AgentError AgentErrorFromStatus(const Status& status);

// An answer the agent's wire form of T did not fit.
Status MalformedAnswer(const std::string& why);

// The answer as T, or the Status of its error (or of its malformation).
template <typename T>
Result<T> DecodeAnswer(const nlohmann::json& answer) {
  if (proto::IsError(answer)) return StatusFromAgentError(answer);
  try {
    return answer.get<T>();
  } catch (const nlohmann::json::exception& e) {
    return MalformedAnswer(e.what());
  }
}

}  // namespace kiln::engine
