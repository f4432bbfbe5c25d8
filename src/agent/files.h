// File operations inside the sandbox. They run as the agent (root in the
// sandbox); what they create belongs to `user`.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace kiln::agent {

class Agent;

// file.read, file.write, file.stat, file.list, file.mkdir, file.remove,
// file.rename. Answers on `stream`, now or after the transfer.
void HandleFileOp(Agent& agent, uint32_t stream, const std::string& op, const nlohmann::json& req);

// Checks `path` for an archive transfer (creating it for a put). Returns ""
// or an error answer as JSON text.
std::string PrepareArchiveDir(const std::string& path, bool create);

// {"error": {code, message, path}} for an errno of an operation on `path`.
nlohmann::json FileError(int err, const std::string& path);

}  // namespace kiln::agent
