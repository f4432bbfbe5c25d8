// One JSON object per line on stderr: {"ts", "level", "msg", ...fields}.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln {

void LogEvent(std::string_view level, std::string_view msg,
              nlohmann::json fields = nlohmann::json::object());
inline void LogInfo(std::string_view msg, nlohmann::json f = nlohmann::json::object()) {
  LogEvent("info", msg, std::move(f));
}
inline void LogWarn(std::string_view msg, nlohmann::json f = nlohmann::json::object()) {
  LogEvent("warn", msg, std::move(f));
}
inline void LogError(std::string_view msg, nlohmann::json f = nlohmann::json::object()) {
  LogEvent("error", msg, std::move(f));
}

}  // namespace kiln
