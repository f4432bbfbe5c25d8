#include "api/kiln/terminal.h"

#include "api/kiln/errors.h"
#include "common/strings.h"

#include <algorithm>
#include <cctype>

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

std::string Range() { return "must be an integer from 1 to " + std::to_string(kTerminalMaxCells); }

bool InRange(const json& v) {
  return v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= kTerminalMaxCells;
}

}  // namespace

std::optional<io::TerminalSize> ReadPtyField(FieldReader& f) {
  const json* v = f.Raw("pty");
  if (!v || v->is_null() || (v->is_boolean() && !v->get<bool>())) return std::nullopt;
  if (v->is_boolean()) return kDefaultTerminalSize;
  if (!v->is_object()) {
    f.Issue("pty", "must be true, false or an object {cols, rows}");
    return std::nullopt;
  }
  io::TerminalSize size = kDefaultTerminalSize;
  for (const auto& [key, value] : v->items()) {
    if (key != "cols" && key != "rows") {
      f.Issue("pty." + key, "is not a known field (cols, rows)");
      continue;
    }
    if (!InRange(value)) {
      f.Issue("pty." + key, Range());
      continue;
    }
    (key == "cols" ? size.cols : size.rows) = value.get<int>();
  }
  return size;
}

io::TerminalSize ReadTerminalSize(FieldReader& f) {
  io::TerminalSize size;
  auto cols = f.Int("cols", 1, kTerminalMaxCells);
  auto rows = f.Int("rows", 1, kTerminalMaxCells);
  if (!cols && !f.has("cols")) f.Issue("cols", "is required");
  if (!rows && !f.has("rows")) f.Issue("rows", "is required");
  size.cols = static_cast<int>(cols.value_or(0));
  size.rows = static_cast<int>(rows.value_or(0));
  return size;
}

TerminalControl ParseTerminalControl(std::string_view text) {
  TerminalControl out;
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) {
    out.error = "a text frame must be a JSON object";
    return out;
  }
  auto type = j.find("type");
  if (type == j.end() || !type->is_string()) {
    out.error = "a text frame needs a string \"type\"";
    return out;
  }
  if (*type != "resize") {
    out.error = "unknown frame type '" + type->get<std::string>() + "' (known: resize)";
    return out;
  }
  for (const char* key : {"cols", "rows"}) {
    auto v = j.find(key);
    if (v == j.end() || !InRange(*v)) {
      out.error = std::string("resize: ") + key + " " + Range();
      return out;
    }
  }
  out.resize = io::TerminalSize{.cols = j["cols"].get<int>(), .rows = j["rows"].get<int>()};
  return out;
}

std::string TerminalReadyFrame(const std::string& process_id) {
  return json{{"type", "ready"}, {"processId", process_id}}.dump();
}

std::string TerminalExitFrame(const io::ProcessInfo& info) {
  return json{{"type", "exit"},
              {"exitCode", info.exit_code ? json(*info.exit_code) : json(nullptr)},
              {"signal", info.signal ? json(*info.signal) : json(nullptr)},
              {"state", io::StateName(info.state)}}
      .dump();
}

std::string TerminalErrorFrame(const Status& status) {
  return StreamErrorJson(CodeName(status.code()), status.message())
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

bool IsWebSocketUpgrade(std::string_view upgrade, std::string_view connection) {
  if (AsciiLower(upgrade) != "websocket") return false;
  std::string conn = AsciiLower(connection);
  size_t start = 0;
  while (start <= conn.size()) {
    size_t end = conn.find(',', start);
    if (end == std::string::npos) end = conn.size();
    std::string token = conn.substr(start, end - start);
    token.erase(0, token.find_first_not_of(" \t"));
    token.erase(token.find_last_not_of(" \t") + 1);
    if (token == "upgrade") return true;
    start = end + 1;
  }
  return false;
}

}  // namespace kiln::api::v1
