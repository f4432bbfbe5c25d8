#include "cli/terminal_client.h"

#include <nlohmann/json.hpp>

#include "proto/signals.h"

namespace kiln::cli {

using nlohmann::json;

std::string ShellQuote(std::string_view word) {
  constexpr std::string_view kSafe =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%";
  if (!word.empty() && word.find_first_not_of(kSafe) == std::string_view::npos)
    return std::string(word);
  std::string out = "'";
  for (char c : word) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string ShellCommandLine(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + ShellQuote(a);
  return out;
}

std::string TerminalTarget(const ApiUrl& url, std::string_view id, int cols, int rows,
                           const std::vector<std::string>& command,
                           const std::optional<std::string>& cwd) {
  Query q;
  q.Add("cols", std::to_string(cols));
  q.Add("rows", std::to_string(rows));
  if (!command.empty()) q.Add("command", ShellCommandLine(command));
  if (cwd) q.Add("cwd", *cwd);
  return url.base_path + SandboxTarget(id, "/terminal") + q.Str();
}

std::string ResizeFrame(int cols, int rows) {
  return json{{"type", "resize"}, {"cols", cols}, {"rows", rows}}.dump();
}

TerminalEvent ParseTerminalEvent(std::string_view text) {
  TerminalEvent ev;
  json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) return ev;
  const std::string type = j["type"];
  if (type == "ready") {
    ev.kind = TerminalEvent::kReady;
    if (j.contains("processId") && j["processId"].is_string()) ev.process_id = j["processId"];
  } else if (type == "exit") {
    ev.kind = TerminalEvent::kExit;
    if (j.contains("exitCode") && j["exitCode"].is_number_integer()) {
      ev.exit_status = j["exitCode"].get<int>();
    } else if (j.contains("signal") && j["signal"].is_string()) {
      int sig = proto::SignalNumber(j["signal"].get<std::string>());
      ev.exit_status = sig > 0 ? 128 + sig : 1;
    } else {
      ev.exit_status = 1;
    }
  } else if (type == "error") {
    ev.kind = TerminalEvent::kError;
    const json& e = j.contains("error") && j["error"].is_object() ? j["error"] : json::object();
    ev.error_code = e.value("code", "error");
    ev.error_message = e.value("message", "the terminal failed");
  }
  return ev;
}

}  // namespace kiln::cli
