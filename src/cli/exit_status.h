// How a finished command maps onto kiln's own exit status (shell rules).
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln::cli {

inline constexpr int kExitTimedOut = 124;  // as timeout(1)

// "SIGKILL", "KILL" or "9" → 9; 0 when unknown.
int SignalNumber(std::string_view name);

// For a CommandResult or an exec stream's "exit" event: 124 when timed
// out, else the exit code, else 128 + the signal number; 1 if none says.
int ExitCodeFor(const nlohmann::json& result);

}  // namespace kiln::cli
