// Signal names as the API spells them ("SIGTERM"), both ways.
#pragma once

#include <string>
#include <string_view>

namespace kiln::proto {

// "SIGKILL" for 9; "SIG<n>" for a number without a name.
std::string SignalName(int sig);
// 0 when `name` is not a known signal name.
int SignalNumber(std::string_view name);

}  // namespace kiln::proto
