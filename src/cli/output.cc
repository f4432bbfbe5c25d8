#include "cli/output.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "cli/errors.h"
#include "common/unique_fd.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;

std::size_t DisplayWidth(std::string_view s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// Never throws on invalid UTF-8 from odd answers: replace it instead.
std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

json ErrorJson(std::string_view code, std::string_view message) {
  return {{"error", {{"code", code}, {"message", message}}}};
}

std::string IssuesText(const json& body) {
  std::string out;
  const json* issues = nullptr;
  if (body.contains("error") && body["error"].is_object()) {
    const json& e = body["error"];
    if (e.contains("details") && e["details"].is_object() && e["details"].contains("issues")) {
      issues = &e["details"]["issues"];
    }
  }
  // One issue is already the message; list them only when there are several.
  if (issues == nullptr || !issues->is_array() || issues->size() < 2) return out;
  for (const auto& issue : *issues) {
    if (!issue.is_object()) continue;
    std::string path =
        issue.contains("path") && issue["path"].is_string() ? issue["path"].get<std::string>() : "";
    std::string msg = issue.contains("message") && issue["message"].is_string()
                          ? issue["message"].get<std::string>()
                          : "";
    out += "  " + (path.empty() ? msg : path + ": " + msg) + "\n";
  }
  return out;
}

}  // namespace

bool WriteAll(int fd, std::string_view bytes) { return kiln::WriteAll(fd, bytes); }

void PrintOut(std::string_view text) { WriteAll(STDOUT_FILENO, text); }

void PrintJson(const json& value) { WriteAll(STDOUT_FILENO, Dump(value) + "\n"); }

void Warn(std::string_view message) {
  WriteAll(STDERR_FILENO, "kiln: warning: " + std::string(message) + "\n");
}

std::string FormatTable(const std::vector<std::string>& headers,
                        const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths(headers.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], DisplayWidth(row[i]));
    }
  };
  measure(headers);
  for (const auto& r : rows) measure(r);

  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      line += cell;
      if (i + 1 < widths.size()) line.append(widths[i] - DisplayWidth(cell) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  emit(headers);
  for (const auto& r : rows) emit(r);
  return out;
}

std::string FormatKeyValues(const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::size_t width = 0;
  for (const auto& [k, v] : pairs) width = std::max(width, DisplayWidth(k));
  std::string out;
  for (const auto& [k, v] : pairs) {
    out += k + ":";
    out.append(width - DisplayWidth(k) + 1, ' ');
    out += v + "\n";
  }
  return out;
}

std::string DisplayValue(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "-";
    case json::value_t::string: {
      const auto& s = value.get_ref<const std::string&>();
      return s.empty() ? "-" : s;
    }
    case json::value_t::object: {
      if (value.empty()) return "-";
      std::string out;
      for (const auto& [k, v] : value.items()) {
        if (!out.empty()) out += ", ";
        out += k + "=" + (v.is_string() ? v.get<std::string>() : Dump(v));
      }
      return out;
    }
    case json::value_t::array: {
      if (value.empty()) return "-";
      std::string out;
      for (const auto& v : value) {
        if (!out.empty()) out += ", ";
        out += v.is_string() ? v.get<std::string>() : Dump(v);
      }
      return out;
    }
    default:
      return Dump(value);
  }
}

std::string FormatFields(const json& info, const std::vector<std::string>& order) {
  std::vector<std::pair<std::string, std::string>> lines;
  if (!info.is_object()) return "";
  for (const auto& key : order) {
    if (info.contains(key)) lines.emplace_back(key, DisplayValue(info[key]));
  }
  for (const auto& [key, value] : info.items()) {
    if (key == "kind" || std::find(order.begin(), order.end(), key) != order.end()) continue;
    lines.emplace_back(key, DisplayValue(value));
  }
  return FormatKeyValues(lines);
}

std::string FormatBytes(const json& bytes) {
  if (!bytes.is_number()) return "-";
  const double n = bytes.get<double>();
  if (n < 1024) return std::to_string(bytes.get<long long>()) + "B";
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double scaled = n / 1024;
  std::size_t unit = 0;
  while (scaled >= 1024 && unit + 1 < std::size(kUnits)) {
    scaled /= 1024;
    ++unit;
  }
  char out[32];
  std::snprintf(out, sizeof out, "%.1f%s", scaled, kUnits[unit]);
  return out;
}

std::string FormatNumber(const json& value, int decimals) {
  if (!value.is_number()) return "-";
  char out[64];
  std::snprintf(out, sizeof out, "%.*f", decimals, value.get<double>());
  return out;
}

void ReportError(const std::exception& error, bool json_mode) {
  std::string text;
  json as_json;
  if (const auto* api = dynamic_cast<const ApiError*>(&error)) {
    text = "kiln: " + api->code + ": " + api->what() + "\n" + IssuesText(api->body);
    as_json = api->body;  // the daemon's own {"error": {...}}
  } else if (const auto* usage = dynamic_cast<const UsageError*>(&error)) {
    text = "kiln: " + std::string(usage->what()) + "\n";
    as_json = ErrorJson("usage", usage->what());
    if (!usage->hint.empty()) {
      text += "(" + usage->hint + ")\n";
      as_json["error"]["hint"] = usage->hint;
    }
  } else if (const auto* down = dynamic_cast<const UnreachableError*>(&error)) {
    text = "kiln: " + std::string(down->what()) + "\n";
    as_json = ErrorJson("unreachable", down->what());
  } else if (const auto* client = dynamic_cast<const ClientError*>(&error)) {
    text = "kiln: " + std::string(client->what()) + "\n";
    as_json = ErrorJson(client->code, client->what());
  } else {
    text = "kiln: " + std::string(error.what()) + "\n";
    as_json = ErrorJson("internal", error.what());
  }
  WriteAll(STDERR_FILENO, json_mode ? Dump(as_json) + "\n" : text);
}

}  // namespace kiln::cli
