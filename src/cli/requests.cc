#include "cli/requests.h"

#include <limits>

#include "cli/url.h"
#include "proto/base64.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;
constexpr std::int64_t kMaxInt = std::numeric_limits<std::int32_t>::max();

// Repeated K=V flags → JSON object; a repeated key keeps the last value.
json key_values(const ParsedArgs& args, const char* flag) {
  json out = json::object();
  for (const auto& text : args.all(flag)) {
    auto [k, v] = split_key_value(std::string("--") + flag, text);
    out[k] = v;
  }
  return out;
}

// Flag values only need to be whole positive numbers here; the daemon
// checks the real ranges and names the field when one is off.
void put_int(json& body, const ParsedArgs& args, const char* flag, const char* field,
             std::int64_t max = kMaxInt) {
  if (auto v = args.get(flag)) body[field] = parse_int(std::string("--") + flag, *v, 1, max);
}

}  // namespace

json sandbox_create_body(const ParsedArgs& args) {
  json body = json::object();
  put_int(body, args, "vcpu", "vcpu");
  put_int(body, args, "memory", "memoryMiB");
  put_int(body, args, "disk", "diskMiB");
  put_int(body, args, "timeout", "timeoutSeconds");
  if (auto name = args.get("name")) body["name"] = *name;
  if (args.has("label")) body["labels"] = key_values(args, "label");
  if (args.has("env")) body["env"] = key_values(args, "env");
  return body;
}

json exec_body(const ParsedArgs& args, const std::vector<std::string>& argv, bool stream,
               const std::optional<std::string>& stdin_bytes) {
  json body = {{"argv", argv}};
  if (auto cwd = args.get("cwd")) body["cwd"] = *cwd;
  if (args.has("env")) body["env"] = key_values(args, "env");
  put_int(body, args, "timeout-ms", "timeoutMs", 86400000);
  if (stdin_bytes) body["stdinBase64"] = proto::Base64Encode(*stdin_bytes);
  if (stream) {
    body["stream"] = true;
    body["outputEncoding"] = "base64";
  }
  return body;
}

std::chrono::milliseconds exec_http_timeout(const json& exec_body) {
  long long ms = kDefaultExecTimeoutMs;
  if (auto it = exec_body.find("timeoutMs"); it != exec_body.end() && it->is_number_integer()) {
    ms = it->get<long long>();
  }
  return std::chrono::milliseconds(ms) + std::chrono::seconds(30);
}

json key_create_body(const ParsedArgs& args) {
  json body = json::object();
  if (auto name = args.get("name")) body["name"] = *name;
  if (auto v = args.get("daily-limit-micros")) {
    body["dailyLimitMicros"] =
        parse_int("--daily-limit-micros", *v, 0, std::numeric_limits<std::int64_t>::max());
  }
  if (args.has("admin")) body["admin"] = true;
  return body;
}

std::string list_target(const ParsedArgs& args, const std::optional<std::string>& cursor) {
  Query q;
  if (args.has("all")) q.add("includeStopped", "true");
  if (auto state = args.get("state")) q.add("state", *state);
  for (const auto& text : args.all("label")) {
    auto [k, v] = split_key_value("--label", text);
    q.add("label", k + ":" + v);
  }
  if (cursor) q.add("cursor", *cursor);
  return "/v1/sandboxes" + q.str();
}

}  // namespace kiln::cli
