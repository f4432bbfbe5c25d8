#include "common/time.h"

#include <time.h>

#include <cctype>
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

int64_t StableNowMs() {
  static const int64_t wall0 = NowMs(), mono0 = MonotonicNowMs();
  return wall0 + (MonotonicNowMs() - mono0);
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

std::optional<int64_t> ParseTime(const std::string& text) {
  int y, mo, d, h, mi, sec, used = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &used) !=
          6 ||
      used != 19)
    return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
  struct tm tm = {};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  int64_t ms = static_cast<int64_t>(timegm(&tm)) * 1000;
  size_t i = 19;
  if (i < text.size() && text[i] == '.') {
    int64_t scale = 100;
    for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
      ms += (text[i] - '0') * scale;
      scale /= 10;
    }
  }
  std::string zone = text.substr(i);
  if (zone == "Z" || zone == "z") return ms;
  int zh, zm;
  if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') &&
      std::sscanf(zone.c_str() + 1, "%2d:%2d", &zh, &zm) == 2) {
    int64_t offset = (zh * 60 + zm) * 60000LL;
    return zone[0] == '+' ? ms - offset : ms + offset;
  }
  return std::nullopt;
}

}  // namespace kiln
