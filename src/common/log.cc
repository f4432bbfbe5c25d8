#include "common/log.h"

#include <cstdio>
#include <mutex>

#include "common/time.h"

namespace kiln {

void LogEvent(std::string_view level, std::string_view msg, nlohmann::json fields) {
  nlohmann::json line = {{"ts", FormatTime(NowMs())}, {"level", level}, {"msg", msg}};
  if (fields.is_object()) line.update(fields);  // {} from a call site arrives as null
  std::string s = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  static std::mutex mu;
  std::lock_guard lock(mu);
  std::fprintf(stderr, "%s\n", s.c_str());
}

}  // namespace kiln
