// Wall-clock and monotonic time, and the API's time format.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kiln {

int64_t NowMs();  // Unix time in milliseconds
int64_t MonotonicNowMs();
// Unix time that never steps: the wall time when this process first asked,
// plus the monotonic time since. Leases and meters use it, so a host clock
// step neither expires every sandbox nor bills an hour that never ran.
int64_t StableNowMs();
// "2026-11-29T10:00:00.123Z"
std::string FormatTime(int64_t unix_ms);
// Parses an RFC 3339 time ("2026-11-29T10:00:00Z", fractions and +hh:mm
// offsets allowed) into Unix ms; nullopt if it is not one.
std::optional<int64_t> ParseTime(const std::string& text);

}  // namespace kiln
