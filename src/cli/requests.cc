#include "cli/requests.h"

#include <cctype>
#include <ctime>
#include <limits>
#include <random>

#include "cli/errors.h"
#include "cli/url.h"
#include "common/base64.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;
constexpr std::int64_t kMaxInt = std::numeric_limits<std::int32_t>::max();

// Repeated K=V flags → JSON object; a repeated key keeps the last value.
json KeyValues(const ParsedArgs& args, const char* flag) {
  json out = json::object();
  for (const auto& text : args.All(flag)) {
    auto [k, v] = SplitKeyValue(std::string("--") + flag, text);
    out[k] = v;
  }
  return out;
}

// Flag values only need to be whole positive numbers here; the daemon
// checks the real ranges and names the field when one is off.
void PutInt(json& body, const ParsedArgs& args, const char* flag, const char* field,
            std::int64_t max = kMaxInt) {
  if (auto v = args.Get(flag)) body[field] = ParseInt(std::string("--") + flag, *v, 1, max);
}

// "7d" / "12h" / "30m" → that long before `now` as RFC 3339; anything else
// is passed on as is (the daemon checks it and names the parameter).
std::string UsageTime(std::string_view flag, const std::string& text,
                      std::chrono::system_clock::time_point now) {
  if (text.size() < 2) return text;
  const char unit = text.back();
  const std::int64_t per_unit = unit == 'd' ? 86400 : unit == 'h' ? 3600 : unit == 'm' ? 60 : 0;
  if (per_unit == 0) return text;
  const std::string digits = text.substr(0, text.size() - 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos) return text;
  const std::int64_t n = ParseInt(flag, digits, 0, 100 * 365);
  const std::time_t t = std::chrono::system_clock::to_time_t(now) - n * per_unit;
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return out;
}

// Every host of a repeatable --allow/--deny, each value split at commas.
json HostList(const ParsedArgs& args, const char* flag) {
  json hosts = json::array();
  for (const auto& text : args.All(flag)) {
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

json SandboxCreateBody(const ParsedArgs& args) {
  json body = json::object();
  PutInt(body, args, "vcpu", "vcpu");
  PutInt(body, args, "memory", "memoryMiB");
  PutInt(body, args, "disk", "diskMiB");
  PutInt(body, args, "timeout", "timeoutSeconds");
  if (auto name = args.Get("name")) body["name"] = *name;
  if (args.Has("label")) body["labels"] = KeyValues(args, "label");
  if (args.Has("env")) body["env"] = KeyValues(args, "env");
  if (auto snapshot = args.Get("snapshot")) body["snapshot"] = *snapshot;
  if (auto image = args.Get("image")) body["image"] = *image;
  if (args.Has("no-internet")) {
    if (args.Get("internet") == "on" || args.Has("allow")) {
      throw UsageError("--no-internet contradicts --internet on and --allow");
    }
    body["network"] = {{"internet", false}};
    if (args.Has("deny")) body["network"]["deny"] = HostList(args, "deny");
  } else if (auto network = NetworkPolicy(args, /*replaces=*/false)) {
    body["network"] = *network;
  }
  if (args.Has("trial") && args.Has("paid")) throw UsageError("give --trial or --paid, not both");
  if (args.Has("trial")) body["funding"] = "trial";
  if (args.Has("paid")) body["funding"] = "paid";
  constexpr std::int64_t kMaxMicros = std::int64_t{1} << 50;
  if (auto v = args.Get("max-cost"))
    body["maxCostMicros"] = ParseInt("--max-cost", *v, 0, kMaxMicros);
  if (auto v = args.Get("max-total-cost")) {
    body["maxTotalCostMicros"] = ParseInt("--max-total-cost", *v, 0, kMaxMicros);
  }
  if (auto v = args.Get("idle-pause"))
    body["idlePauseSeconds"] = ParseInt("--idle-pause", *v, 0, kMaxInt);
  if (auto v = args.Get("auto-wake")) {
    if (*v != "on" && *v != "off")
      throw UsageError("--auto-wake expects on or off, got '" + *v + "'");
    body["autoWake"] = *v == "on";
  }
  if (auto v = args.Get("on-lease-end")) {
    if (*v != "pause" && *v != "stop") {
      throw UsageError("--on-lease-end expects pause or stop, got '" + *v + "'");
    }
    body["onLeaseEnd"] = *v;
  }
  if (args.Has("persistent")) body["persistent"] = true;
  if (args.Has("pause-files-only")) body["pauseMemory"] = false;
  if (args.Has("no-sudo")) body["sudo"] = false;
  if (args.Has("get-or-create")) {
    if (!body.contains("name")) throw UsageError("--get-or-create needs --name");
    body["getOrCreate"] = true;
  }
  return body;
}

nlohmann::json WakeBody(const ParsedArgs& args) {
  json body = json::object();
  PutInt(body, args, "timeout", "timeoutSeconds");
  return body;
}

nlohmann::json SpawnBody(const ParsedArgs& args, const std::vector<std::string>& argv) {
  if (argv.empty()) throw UsageError("give the command after --: spawn ID -- CMD...");
  json body = {{"argv", argv}};
  if (auto cwd = args.Get("cwd")) body["cwd"] = *cwd;
  if (args.Has("env")) body["env"] = KeyValues(args, "env");
  if (auto v = args.Get("timeout-ms")) {
    body["timeoutMs"] = ParseInt("--timeout-ms", *v, 0, contract::kProcessTimeoutMs.max);
  }
  return body;
}

nlohmann::json SignalBody(const ParsedArgs& args) {
  std::string signal = args.Get("signal").value_or("SIGTERM");
  for (char& c : signal) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (signal.rfind("SIG", 0) != 0) signal = "SIG" + signal;
  static const char* const kSignals[] = {"SIGTERM", "SIGKILL", "SIGINT", "SIGHUP",
                                         "SIGQUIT", "SIGUSR1", "SIGUSR2"};
  for (const char* known : kSignals) {
    if (signal == known) return {{"signal", signal}};
  }
  throw UsageError("--signal expects TERM, KILL, INT, HUP, QUIT, USR1 or USR2, got '" +
                   *args.Get("signal") + "'");
}

json ExecBody(const ParsedArgs& args, const std::vector<std::string>& argv, bool stream,
              const std::optional<std::string>& stdin_bytes) {
  json body = {{"argv", argv}};
  if (auto cwd = args.Get("cwd")) body["cwd"] = *cwd;
  if (args.Has("env")) body["env"] = KeyValues(args, "env");
  PutInt(body, args, "timeout-ms", "timeoutMs", contract::kExecTimeoutMs.max);
  if (auto seconds = args.Get("timeout")) {  // run's --timeout: the command's, in seconds
    if (args.Has("timeout-ms")) throw UsageError("give --timeout or --timeout-ms, not both");
    body["timeoutMs"] =
        ParseInt("--timeout", *seconds, 1, contract::kExecTimeoutMs.max / 1000) * 1000;
  }
  if (stdin_bytes) body["stdinBase64"] = Base64Encode(*stdin_bytes);
  if (stream) {
    body["stream"] = true;
    body["outputEncoding"] = "base64";
  }
  return body;
}

std::chrono::milliseconds ExecHttpTimeout(const json& exec_body) {
  long long ms = kDefaultExecTimeoutMs;
  if (auto it = exec_body.find("timeoutMs"); it != exec_body.end() && it->is_number_integer()) {
    ms = it->get<long long>();
  }
  return std::chrono::milliseconds(ms + contract::kExecGraceMs);
}

json KeyCreateBody(const ParsedArgs& args) {
  json body = json::object();
  if (auto name = args.Get("name")) body["name"] = *name;
  if (auto v = args.Get("daily-limit-micros")) {
    body["dailyLimitMicros"] =
        ParseInt("--daily-limit-micros", *v, 0, std::numeric_limits<std::int64_t>::max());
  }
  if (args.Has("admin")) body["admin"] = true;
  return body;
}

std::string ListTarget(const ParsedArgs& args, const std::optional<std::string>& cursor) {
  Query q;
  if (args.Has("all")) q.Add("includeStopped", "true");
  if (auto state = args.Get("state")) q.Add("state", *state);
  for (const auto& text : args.All("label")) {
    auto [k, v] = SplitKeyValue("--label", text);
    q.Add("label", k + ":" + v);
  }
  if (cursor) q.Add("cursor", *cursor);
  return "/v1/sandboxes" + q.Str();
}

int WaitSeconds(const ParsedArgs& args) {
  auto v = args.Get("wait");
  return v ? static_cast<int>(ParseInt("--wait", *v, 0, kDefaultWaitSeconds)) : kDefaultWaitSeconds;
}

std::string NewIdempotencyKey() {
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

json SnapshotBody(const ParsedArgs& args) {
  json body = json::object();
  if (auto name = args.Get("name")) body["name"] = *name;
  if (args.Has("label")) body["labels"] = KeyValues(args, "label");
  PutInt(body, args, "retention-days", "retentionDays");
  if (args.Has("disk")) body["mode"] = "disk";
  return body;
}

json ForkBody(const ParsedArgs& args) {
  json body = json::object();
  PutInt(body, args, "count", "count");
  if (args.Has("label")) body["labels"] = KeyValues(args, "label");
  if (args.Has("keep-snapshot")) body["keepSnapshot"] = true;
  if (auto network = NetworkPolicy(args, /*replaces=*/true)) body["network"] = *network;
  return body;
}

std::optional<json> NetworkPolicy(const ParsedArgs& args, bool replaces) {
  const auto internet = args.Get("internet");
  const json allow = HostList(args, "allow");
  const json deny = HostList(args, "deny");
  if (!internet && !args.Has("allow") && !args.Has("deny")) return std::nullopt;
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

std::optional<json> NetworkPutBody(const ParsedArgs& args) {
  const bool sets = args.Has("internet") || args.Has("allow") || args.Has("deny");
  if (args.Has("log") && sets) {
    throw UsageError(
        "--log shows the log; it cannot be combined with --internet, --allow or --deny");
  }
  if (auto limit = args.Get("limit")) {
    if (!args.Has("log")) throw UsageError("--limit goes with --log");
    ParseInt("--limit", *limit, 1, kMaxLogPage);
  }
  return NetworkPolicy(args, /*replaces=*/true);
}

std::string NetworkLogTarget(const std::string& id, const ParsedArgs& args,
                             const std::optional<std::string>& cursor) {
  Query q;
  if (auto limit = args.Get("limit")) {
    q.Add("limit", std::to_string(ParseInt("--limit", *limit, 1, kMaxLogPage)));
  }
  if (cursor) q.Add("cursor", *cursor);
  return SandboxTarget(id, "/network/log") + q.Str();
}

json PauseBody(const ParsedArgs& args) {
  json body = json::object();
  if (args.Has("files-only")) body["memory"] = false;
  return body;
}

std::string MetricsTarget(const std::string& id, const ParsedArgs& args) {
  Query q;
  if (auto range = args.Get("range")) q.Add("range", *range);
  return SandboxTarget(id, "/metrics") + q.Str();
}

json ExtendBody(const ParsedArgs& args) {
  json body = json::object();
  PutInt(body, args, "seconds", "seconds");
  return body;
}

std::string SnapshotListTarget(const ParsedArgs& args, const std::optional<std::string>& cursor) {
  Query q;
  if (auto id = args.Get("sandbox")) q.Add("sandboxId", *id);
  if (auto name = args.Get("name")) q.Add("name", *name);
  if (cursor) q.Add("cursor", *cursor);
  return "/v1/snapshots" + q.Str();
}

std::string UsageTarget(const ParsedArgs& args, std::chrono::system_clock::time_point now) {
  Query q;
  if (auto from = args.Get("from")) q.Add("from", UsageTime("--from", *from, now));
  if (auto to = args.Get("to")) q.Add("to", UsageTime("--to", *to, now));
  if (auto by = args.Get("group-by")) {
    if (*by != "key" && !(by->starts_with("label:") && by->size() > 6)) {
      throw UsageError("--group-by expects key or label:NAME, got '" + *by + "'");
    }
    q.Add("groupBy", *by);
  }
  return "/v1/usage" + q.Str();
}

}  // namespace kiln::cli
