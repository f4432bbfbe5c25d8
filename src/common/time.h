// Wall-clock and monotonic time, and the API's time format.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

int64_t NowMs();  // Unix time in milliseconds
int64_t MonotonicNowMs();
// "2026-11-29T10:00:00.123Z"
std::string FormatTime(int64_t unix_ms);

}  // namespace kiln
