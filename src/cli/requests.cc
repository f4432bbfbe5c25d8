#include "cli/requests.h"

#include <ctime>
#include <limits>
#include <random>

#include "cli/errors.h"
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

// "7d" / "12h" / "30m" → that long before `now` as RFC 3339; anything else
// is passed on as is (the daemon checks it and names the parameter).
std::string usage_time(std::string_view flag, const std::string& text,
                       std::chrono::system_clock::time_point now) {
  if (text.size() < 2) return text;
  const char unit = text.back();
  const std::int64_t per_unit = unit == 'd' ? 86400 : unit == 'h' ? 3600 : unit == 'm' ? 60 : 0;
  if (per_unit == 0) return text;
  const std::string digits = text.substr(0, text.size() - 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos) return text;
  const std::int64_t n = parse_int(flag, digits, 0, 100 * 365);
  const std::time_t t = std::chrono::system_clock::to_time_t(now) - n * per_unit;
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return out;
}

// Every host of a repeatable --allow/--deny, each value split at commas.
json host_list(const ParsedArgs& args, const char* flag) {
  json hosts = json::array();
  for (const auto& text : args.all(flag)) {
    std::size_t start = 0;
    for (;;) {
      const std::size_t comma = text.find(',', start);
      std::string host = text.substr(start, comma == std::string::npos ? comma : comma - start);
      host.erase(0, host.find_first_not_of(" \t"));
      host.erase(host.find_last_not_of(" \t") + 1);
      if (host.empty()) {
        throw UsageError(std::string("--") + flag + " expects a host, got '" + text + "'");
      }
      hosts.push_back(std::move(host));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return hosts;
}

constexpr int kMaxLogPage = 500;  // the daemon's cap

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
  if (auto snapshot = args.get("snapshot")) body["snapshot"] = *snapshot;
  if (auto network = network_policy(args, /*replaces=*/false)) body["network"] = *network;
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

int wait_seconds(const ParsedArgs& args) {
  auto v = args.get("wait");
  return v ? static_cast<int>(parse_int("--wait", *v, 0, kDefaultWaitSeconds))
           : kDefaultWaitSeconds;
}

std::string new_idempotency_key() {
  std::random_device rd;
  std::uniform_int_distribution<unsigned> byte(0, 255);
  unsigned char b[16];
  for (auto& c : b) c = static_cast<unsigned char>(byte(rd));
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[b[i] >> 4];
    out += kHex[b[i] & 0xf];
  }
  return out;
}

json snapshot_body(const ParsedArgs& args) {
  json body = json::object();
  if (auto name = args.get("name")) body["name"] = *name;
  if (args.has("label")) body["labels"] = key_values(args, "label");
  put_int(body, args, "retention-days", "retentionDays");
  return body;
}

json fork_body(const ParsedArgs& args) {
  json body = json::object();
  put_int(body, args, "count", "count");
  if (args.has("label")) body["labels"] = key_values(args, "label");
  if (args.has("keep-snapshot")) body["keepSnapshot"] = true;
  if (auto network = network_policy(args, /*replaces=*/true)) body["network"] = *network;
  return body;
}

std::optional<json> network_policy(const ParsedArgs& args, bool replaces) {
  const auto internet = args.get("internet");
  const json allow = host_list(args, "allow");
  const json deny = host_list(args, "deny");
  if (!internet && !args.has("allow") && !args.has("deny")) return std::nullopt;
  if (internet && *internet != "on" && *internet != "off") {
    throw UsageError("--internet expects on or off, got '" + *internet + "'");
  }
  if (internet == "off" && !allow.empty()) {
    throw UsageError(
        "--internet off contradicts --allow: allowed hosts are reached over the internet "
        "(--allow implies --internet on)");
  }
  if (replaces && !internet && allow.empty()) {
    throw UsageError(
        "say --internet on or off: the new policy replaces every rule (--allow implies "
        "--internet on)");
  }
  return json{{"internet", internet ? *internet == "on" : !allow.empty()},
              {"allow", allow},
              {"deny", deny}};
}

std::optional<json> network_put_body(const ParsedArgs& args) {
  const bool sets = args.has("internet") || args.has("allow") || args.has("deny");
  if (args.has("log") && sets) {
    throw UsageError(
        "--log shows the log; it cannot be combined with --internet, --allow or --deny");
  }
  if (auto limit = args.get("limit")) {
    if (!args.has("log")) throw UsageError("--limit goes with --log");
    parse_int("--limit", *limit, 1, kMaxLogPage);
  }
  return network_policy(args, /*replaces=*/true);
}

std::string network_log_target(const std::string& id, const ParsedArgs& args,
                               const std::optional<std::string>& cursor) {
  Query q;
  if (auto limit = args.get("limit")) {
    q.add("limit", std::to_string(parse_int("--limit", *limit, 1, kMaxLogPage)));
  }
  if (cursor) q.add("cursor", *cursor);
  return sandbox_target(id, "/network/log") + q.str();
}

json extend_body(const ParsedArgs& args) {
  json body = json::object();
  put_int(body, args, "seconds", "seconds");
  return body;
}

std::string snapshot_list_target(const ParsedArgs& args, const std::optional<std::string>& cursor) {
  Query q;
  if (auto id = args.get("sandbox")) q.add("sandboxId", *id);
  if (auto name = args.get("name")) q.add("name", *name);
  if (cursor) q.add("cursor", *cursor);
  return "/v1/snapshots" + q.str();
}

std::string usage_target(const ParsedArgs& args, std::chrono::system_clock::time_point now) {
  Query q;
  if (auto from = args.get("from")) q.add("from", usage_time("--from", *from, now));
  if (auto to = args.get("to")) q.add("to", usage_time("--to", *to, now));
  if (auto by = args.get("group-by")) {
    if (*by != "key" && !(by->starts_with("label:") && by->size() > 6)) {
      throw UsageError("--group-by expects key or label:NAME, got '" + *by + "'");
    }
    q.add("groupBy", *by);
  }
  return "/v1/usage" + q.str();
}

}  // namespace kiln::cli
