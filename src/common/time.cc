#include "common/time.h"

#include <time.h>

#include <cstdio>

namespace kiln {

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t MonotonicNowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

std::string FormatTime(int64_t unix_ms) {
  // Floor division, so times before 1970 format correctly too.
  int64_t ms = ((unix_ms % 1000) + 1000) % 1000;
  time_t secs = static_cast<time_t>((unix_ms - ms) / 1000);
  tm t;
  gmtime_r(&secs, &t);
  char buf[64];  // room for any int year, so no truncation warning
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", t.tm_year + 1900,
                t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, static_cast<int>(ms));
  return buf;
}

}  // namespace kiln
