// Background processes:
// /v1/sandboxes/{id}/processes[/{pid}[/output|:write|:signal|:resize]].
#include <algorithm>
#include <cstdint>
#include <string>

#include "api/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/routes.h"
#include "api/kiln/terminal.h"
#include "api/utf8.h"
#include "api/validate.h"
#include "common/base64.h"
#include "common/contract.h"

namespace kiln::api {

using nlohmann::json;

namespace {

// follow=true: NDJSON events until the process ends, by long polls.
void Follow(Exchange& ex, const io::SandboxIo& sandbox, const std::string& id, uint64_t cursor) {
  bool begun = false;
  for (;;) {
    io::OutputPage page = ValueOrThrow(sandbox.ProcessOutput(id, cursor, 20000, 40000));
    if (!begun) {
      if (!ex.BeginStream(200, "application/x-ndjson")) return;
      begun = true;
    }
    std::string out;
    if (page.dropped_bytes > 0)
      out += json{{"type", "truncated"},
                  {"droppedBytes", page.dropped_bytes},
                  {"resumeAt", page.first_offset}}
                 .dump() +
             "\n";
    for (const auto& c : page.chunks) {
      out += json{{"type", io::StreamName(c.stream)},
                  {"offset", c.offset},
                  {"data", SanitizeUtf8(c.data)}}
                 .dump(-1, ' ', false, json::error_handler_t::replace) +
             "\n";
    }
    cursor = page.next_cursor;
    if (page.complete) {
      const io::ProcessInfo& p = page.process;
      out += json{{"type", "exit"},
                  {"exitCode", p.exit_code ? json(*p.exit_code) : json(nullptr)},
                  {"signal", p.signal ? json(*p.signal) : json(nullptr)},
                  {"state", io::StateName(p.state)},
                  {"timedOut", p.state == io::ProcessState::kTimedOut}}
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
    io::ProcessSpec req;
    ReadCommandFields(f, *s, &req.command);
    if (auto mode = f.String("stdinMode", 16)) {
      if (*mode != "pipe" && *mode != "none") f.Issue("stdinMode", "must be pipe or none");
      req.stdin_pipe = *mode == "pipe";
    }
    req.timeout_ms = f.Int("timeoutMs", contract::kProcessTimeoutMs);
    // A terminal's stdin is always open: it is how keys reach it.
    req.pty = ReadPtyField(f);
    if (req.pty) req.stdin_pipe = true;
    f.Finish();
    ex.SendJson(200, ProcessJson(ValueOrThrow(RunningIo(ctx, ex, *s).ProcessStart(req))));
  });

  r.Add("GET", "/v1/sandboxes/{id}/processes", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json data = json::array();
    for (const auto& p : ValueOrThrow(RunningIo(ctx, ex, *s).ProcessList()))
      data.push_back(ProcessJson(p));
    ex.SendJson(200, json{{"data", data}});
  });

  r.Add("GET", "/v1/sandboxes/{id}/processes/{pid}", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    ex.SendJson(200,
                ProcessJson(ValueOrThrow(RunningIo(ctx, ex, *s).ProcessGet(ex.params["pid"]))));
  });

  r.Add("GET", "/v1/sandboxes/{id}/processes/{pid}/output", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    io::SandboxIo sandbox = RunningIo(ctx, ex, *s);
    uint64_t cursor = static_cast<uint64_t>(QueryInt(ex, "cursor", 0, INT64_MAX, 0));
    int64_t wait_ms = QueryInt(ex, "waitMs", contract::kOutputWaitMs.min,
                               contract::kOutputWaitMs.max, contract::kOutputWaitMs.def);
    std::string follow = ex.Query("follow").value_or("false");
    if (follow != "true" && follow != "false")
      throw InvalidField("query.follow", "must be true or false");
    if (follow == "true") {
      // Check the process exists before answering 200.
      ValueOrThrow(sandbox.ProcessGet(ex.params["pid"]));
      auto stream_slot = OpenStream(ctx, *s);
      return Follow(ex, sandbox, ex.params["pid"], cursor);
    }
    ex.SendJson(200, OutputPageJson(ValueOrThrow(sandbox.ProcessOutput(
                         ex.params["pid"], cursor, wait_ms, static_cast<int>(wait_ms) + 30000))));
  });

  r.Add("POST", "/v1/sandboxes/{id}/processes/{pid}:write", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody(16 << 20);
    FieldReader f(body);
    auto data = f.String("data", contract::kStdinMax);
    auto b64 = f.String("base64", contract::kStdinBase64Max);
    bool eof = f.Bool("eof").value_or(false);
    // Where these bytes start in the process's stdin, as the caller counts:
    // bytes before the offset already taken are not written twice.
    auto at = f.Int("offset", 0, INT64_MAX);
    if (data && b64) f.Issue("data", "give either data or base64, not both");
    std::optional<std::string> decoded = b64 ? Base64Decode(*b64) : std::nullopt;
    if (b64 && !decoded) f.Issue("base64", "is not valid base64");
    f.Finish();
    std::string bytes = b64 ? *decoded : data.value_or("");
    io::SandboxIo sandbox = RunningIo(ctx, ex, *s);
    if (at) {
      uint64_t taken = ValueOrThrow(sandbox.ProcessGet(ex.params["pid"])).stdin_offset;
      uint64_t start = static_cast<uint64_t>(*at);
      if (start > taken)
        throw InvalidField("body.offset",
                           "is past the " + std::to_string(taken) + " stdin bytes taken so far");
      bytes.erase(0, std::min<uint64_t>(taken - start, bytes.size()));
    }
    uint64_t offset = ValueOrThrow(sandbox.ProcessWrite(ex.params["pid"], bytes, eof));
    ex.SendJson(200, json{{"offset", offset}});
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
    ex.SendJson(
        200,
        ProcessJson(ValueOrThrow(RunningIo(ctx, ex, *s).ProcessSignal(ex.params["pid"], sig))));
  });

  r.Add("POST", "/v1/sandboxes/{id}/processes/{pid}:resize", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    io::TerminalSize size = ReadTerminalSize(f);
    f.Finish();
    ex.SendJson(
        200,
        ProcessJson(ValueOrThrow(RunningIo(ctx, ex, *s).ProcessResize(ex.params["pid"], size))));
  });
}

}  // namespace kiln::api
