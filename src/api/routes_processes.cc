// Background processes: /v1/sandboxes/{id}/processes[/{pid}[/output|:write|:signal]].
#include "api/errors.h"
#include "api/routes.h"
#include "api/utf8.h"
#include "api/validate.h"
#include "common/time.h"
#include "proto/base64.h"
#include "proto/signals.h"

namespace kiln::api {

using nlohmann::json;

namespace {

json ProcessInfo(const json& a) {
  auto time_or_null = [](const json& ms) {
    return ms.is_number() ? json(FormatTime(ms.get<int64_t>())) : json(nullptr);
  };
  return json{{"id", a["id"]},
              {"kind", "process"},
              {"pid", a["pid"]},
              {"state", a["state"]},
              {"exitCode", a["exitCode"]},
              {"signal", a["signal"]},
              {"command", a["command"]},
              {"argv", a["argv"]},
              {"cwd", a["cwd"]},
              {"stdinOpen", a["stdinOpen"]},
              {"stdinOffset", a["stdinOffset"]},
              {"timeoutMs", a["timeoutMs"]},
              {"startedAt", time_or_null(a["startedMs"])},
              {"endedAt", time_or_null(a["endedMs"])},
              {"outputBytes", a["outputBytes"]},
              {"firstOffset", a["firstOffset"]}};
}

json OutputPage(const json& a) {
  json chunks = json::array();
  for (const auto& c : a["chunks"]) {
    auto bytes = proto::Base64Decode(c["base64"].get<std::string>()).value_or("");
    chunks.push_back(
        json{{"offset", c["offset"]}, {"stream", c["stream"]}, {"data", SanitizeUtf8(bytes)}});
  }
  return json{{"chunks", chunks},
              {"nextCursor", a["nextCursor"]},
              {"firstOffset", a["firstOffset"]},
              {"droppedBytes", a["droppedBytes"]},
              {"complete", a["complete"]},
              {"state", a["process"]["state"]}};
}

// follow=true: NDJSON events until the process ends, by long polls.
void Follow(Exchange& ex, engine::AgentChannel& conn, const std::string& id, uint64_t cursor) {
  bool begun = false;
  for (;;) {
    json a = CallAgent(
        conn, json{{"op", "proc.output"}, {"id", id}, {"cursor", cursor}, {"waitMs", 20000}},
        40000);
    if (!begun) {
      if (!ex.BeginStream(200, "application/x-ndjson")) return;
      begun = true;
    }
    std::string out;
    if (a["droppedBytes"].get<uint64_t>() > 0)
      out += json{{"type", "truncated"},
                  {"droppedBytes", a["droppedBytes"]},
                  {"resumeAt", a["firstOffset"]}}
                 .dump() +
             "\n";
    for (const auto& c : a["chunks"]) {
      auto bytes = proto::Base64Decode(c["base64"].get<std::string>()).value_or("");
      out +=
          json{{"type", c["stream"]}, {"offset", c["offset"]}, {"data", SanitizeUtf8(bytes)}}.dump(
              -1, ' ', false, json::error_handler_t::replace) +
          "\n";
    }
    cursor = a["nextCursor"].get<uint64_t>();
    if (a["complete"].get<bool>()) {
      const json& p = a["process"];
      out += json{{"type", "exit"},
                  {"exitCode", p["exitCode"]},
                  {"signal", p["signal"]},
                  {"state", p["state"]},
                  {"timedOut", p["state"] == "timed_out"}}
                 .dump() +
             "\n";
      ex.WriteChunk(out);
      return ex.EndStream();
    }
    if (!out.empty() && !ex.WriteChunk(out)) return;
  }
}

}  // namespace

void AddProcessRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/v1/sandboxes/{id}/processes", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    json req{{"op", "proc.start"}};
    ReadCommandFields(f, *s, &req);
    if (auto mode = f.String("stdinMode", 16)) {
      if (*mode != "pipe" && *mode != "none") f.Issue("stdinMode", "must be pipe or none");
      req["stdin"] = *mode;
    }
    if (auto t = f.Int("timeoutMs", 0, 86400000)) req["timeoutMs"] = *t;
    f.Finish();
    ex.SendJson(200, ProcessInfo(CallAgent(*RunningConn(*s), req)));
  });

  r.Add("GET", "/v1/sandboxes/{id}/processes", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json a = CallAgent(*RunningConn(*s), json{{"op", "proc.list"}});
    json data = json::array();
    for (const auto& p : a["data"]) data.push_back(ProcessInfo(p));
    ex.SendJson(200, json{{"data", data}});
  });

  r.Add("GET", "/v1/sandboxes/{id}/processes/{pid}", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    ex.SendJson(200, ProcessInfo(CallAgent(*RunningConn(*s),
                                           json{{"op", "proc.get"}, {"id", ex.params["pid"]}})));
  });

  r.Add("GET", "/v1/sandboxes/{id}/processes/{pid}/output", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    auto conn = RunningConn(*s);
    uint64_t cursor = static_cast<uint64_t>(QueryInt(ex, "cursor", 0, INT64_MAX, 0));
    int64_t wait_ms = QueryInt(ex, "waitMs", 0, 30000, 0);
    std::string follow = ex.Query("follow").value_or("false");
    if (follow != "true" && follow != "false")
      throw InvalidField("query.follow", "must be true or false");
    if (follow == "true") {
      // Check the process exists before answering 200.
      CallAgent(*conn, json{{"op", "proc.get"}, {"id", ex.params["pid"]}});
      return Follow(ex, *conn, ex.params["pid"], cursor);
    }
    json a = CallAgent(*conn,
                       json{{"op", "proc.output"},
                            {"id", ex.params["pid"]},
                            {"cursor", cursor},
                            {"waitMs", wait_ms}},
                       static_cast<int>(wait_ms) + 30000);
    ex.SendJson(200, OutputPage(a));
  });

  r.Add("POST", "/v1/sandboxes/{id}/processes/{pid}:write", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody(16 << 20);
    FieldReader f(body);
    auto data = f.String("data", 64 << 20);
    auto b64 = f.String("base64", 96 << 20);
    bool eof = f.Bool("eof").value_or(false);
    if (data && b64) f.Issue("data", "give either data or base64, not both");
    if (b64 && !proto::Base64Decode(*b64)) f.Issue("base64", "is not valid base64");
    f.Finish();
    std::string encoded = b64 ? *b64 : proto::Base64Encode(data.value_or(""));
    json a = CallAgent(
        *RunningConn(*s),
        json{{"op", "proc.write"}, {"id", ex.params["pid"]}, {"base64", encoded}, {"eof", eof}});
    ex.SendJson(200, json{{"offset", a["offset"]}});
  });

  r.Add("POST", "/v1/sandboxes/{id}/processes/{pid}:signal", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    std::string sig = f.String("signal", 16).value_or("SIGTERM");
    static const std::set<std::string> kAllowed = {"SIGTERM", "SIGKILL", "SIGINT", "SIGHUP",
                                                   "SIGQUIT", "SIGUSR1", "SIGUSR2"};
    if (!kAllowed.count(sig))
      f.Issue("signal",
              "must be one of SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2");
    f.Finish();
    ex.SendJson(200, ProcessInfo(CallAgent(
                         *RunningConn(*s),
                         json{{"op", "proc.signal"}, {"id", ex.params["pid"]}, {"signal", sig}})));
  });
}

}  // namespace kiln::api
