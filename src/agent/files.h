// File operations inside the sandbox. They run as the agent (root in the
// sandbox); what they create belongs to `user`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <sys/stat.h>

#include <string_view>

#include <nlohmann/json.hpp>

#include "proto/ops.h"

namespace kiln::agent {

class Agent;

// The file ops (proto::kFileRead ... kFileRename): answers on `stream`, now
// or after the transfer. False if `op` is none of them.
bool HandleFileOp(Agent& agent, uint32_t stream, const std::string& op, const nlohmann::json& req);

// Checks `path` for an archive transfer (creating it for a put); the error
// answer if it will not do.
std::optional<proto::AgentError> PrepareArchiveDir(const std::string& path, bool create);

// The entry for `path` as lstat found it, with its attributes under
// `xattr_prefix` ("" for none: agent/xattrs.h).
proto::FileEntry EntryAt(const std::string& path, const struct stat& st,
                         std::string_view xattr_prefix);

// The error answer for an errno of an operation on `path`.
proto::AgentError FileError(int err, const std::string& path);

}  // namespace kiln::agent
