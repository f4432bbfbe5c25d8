// POST /v1/sandboxes/{id}:exec -- a command to completion, answered as one
// CommandResult or streamed as NDJSON events.
#include "api/errors.h"
#include "api/kiln/routes.h"
#include "api/utf8.h"
#include "api/validate.h"
#include "common/base64.h"
#include "common/contract.h"
#include "common/time.h"

namespace kiln::api {

using io::ExecEvent;
using io::OutputStream;
using nlohmann::json;

namespace {

struct ExecCall {
  io::Command command;
  io::ExecOptions options;
  bool stream = false;
  bool base64 = false;
};

ExecCall ReadExec(const json& body, const control::Sandbox& s) {
  FieldReader f(body);
  ExecCall r;
  ReadCommandFields(f, s, &r.command);
  auto text = f.String("stdin", contract::kStdinMax);
  auto b64 = f.String("stdinBase64", contract::kStdinBase64Max);
  if (text && b64) f.Issue("stdin", "give either stdin or stdinBase64, not both");
  if (text) r.options.stdin_bytes = *text;
  if (b64) {
    r.options.stdin_bytes = Base64Decode(*b64);
    if (!r.options.stdin_bytes) f.Issue("stdinBase64", "is not valid base64");
  }
  r.options.timeout_ms = f.Int("timeoutMs", contract::kExecTimeoutMs);
  r.stream = f.Bool("stream").value_or(false);
  // kiln's own: a command whose output passes the answer's cap is killed at
  // once (graders: its answer is already wrong, and a flood costs CPU).
  bool stop_at_cap = f.Bool("stopAtOutputCap").value_or(false);
  if (stop_at_cap && r.stream) f.Issue("stopAtOutputCap", "applies to JSON answers, not streams");
  if (auto enc = f.String("outputEncoding", 16)) {
    if (*enc != "utf8" && *enc != "base64") f.Issue("outputEncoding", "must be utf8 or base64");
    r.base64 = *enc == "base64";
  }
  f.Finish();
  // The answer's cap per stream: 64 KiB, or 1 MiB past a 60 s timeout.
  r.options.capture_cap = r.stream ? 0 : contract::ExecOutputCap(r.options.timeout_ms);
  r.options.kill_past_cap = stop_at_cap;
  return r;
}

json ExitFields(const io::ExitStatus& exit) {
  return json{{"exitCode", exit.exit_code ? json(*exit.exit_code) : json(nullptr)},
              {"signal", exit.signal ? json(*exit.signal) : json(nullptr)},
              {"timedOut", exit.timed_out},
              {"durationMs", exit.duration_ms}};
}

void RunJson(Exchange& ex, const io::SandboxIo& sandbox, const ExecCall& req) {
  io::ExecResult run =
      ValueOrThrow(sandbox.ExecToEnd(req.command, req.options, [&ex] { return ex.ClientGone(); }));
  if (run.end == io::ExecResult::End::kAbandoned) return;
  if (run.end == io::ExecResult::End::kDeadline)
    throw ApiError(Code::kAgentTimeout, "the command did not finish within its timeout");
  json result = ExitFields(run.exit);
  result["stdout"] = SanitizeUtf8(run.stdout_data);
  result["stderr"] = SanitizeUtf8(run.stderr_data);
  result["stdoutTruncated"] = run.stdout_truncated;
  result["stderrTruncated"] = run.stderr_truncated;
  result["processId"] = run.pid ? std::to_string(*run.pid) : "";
  ex.SendJson(200, result);
}

// One base64 output event as an NDJSON line. The payload is spliced into the
// serialized envelope: base64 needs no escaping, and running a 64 KiB chunk
// through the serializer's character-by-character escaping took most of
// kilnd's CPU when streaming.
std::string Base64EventLine(OutputStream stream, uint64_t offset, std::string_view data) {
  json ev{{"type", io::StreamName(stream)}, {"offset", offset}, {"base64", true}, {"data", ""}};
  std::string line = ev.dump();
  line.insert(line.find("\"data\":\"\"") + 8, Base64Encode(data));
  line += '\n';
  return line;
}

void RunStream(Exchange& ex, io::ExecStream& run, const ExecCall& req) {
  auto line = [&](const json& j) {
    return ex.WriteChunk(j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
  };
  bool started = false;
  // Answers 200 and the start event once (a command that failed to start
  // reports on stderr before any start event: its processId is "0").
  auto begin = [&](const std::string& pid) {
    if (started) return true;
    started = true;
    return ex.BeginStream(200, "application/x-ndjson") &&
           line(json{{"type", "start"}, {"processId", pid}});
  };
  // An error after the stream began: its last line.
  auto fail = [&](std::string_view code, std::string_view message) {
    line(json{{"type", "error"}, {"error", {{"code", code}, {"message", message}}}});
    ex.EndStream();
  };
  // Bytes of a character split across chunks, held back with the offset of
  // their first byte in the combined output.
  std::string carry[3];
  uint64_t carry_offset[3] = {0, 0, 0};
  uint64_t offset = 0;
  int64_t deadline = io::AnswerDeadline(req.options);
  for (ExecEvent ev;;) {
    if (MonotonicNowMs() > deadline) {
      if (!started) throw ApiError(Code::kAgentTimeout, "the command did not start");
      return fail("agent_timeout", "no answer from the sandbox");
    }
    if (!run.Next(&ev, 250)) {
      if (ex.ClientGone()) return run.Cancel();  // a silent command, and nobody listens
      continue;
    }
    if (ev.kind == ExecEvent::kStarted) {
      if (!begin(std::to_string(ev.pid))) return run.Cancel();
    } else if (ev.kind == ExecEvent::kOutput) {
      uint8_t ch = static_cast<uint8_t>(ev.stream);
      if (req.base64) {
        if (!begin("0") || !ex.WriteChunk(Base64EventLine(ev.stream, offset, ev.data)))
          return run.Cancel();
        offset += ev.data.size();
        continue;
      }
      uint64_t first = carry[ch].empty() ? offset : carry_offset[ch];
      std::string text = carry[ch] + ev.data;
      size_t whole = CompleteUtf8Prefix(text);
      carry[ch] = text.substr(whole);
      carry_offset[ch] = first + whole;
      json out{{"type", io::StreamName(ev.stream)},
               {"offset", first},
               {"data", SanitizeUtf8(std::string_view(text).substr(0, whole))}};
      offset += ev.data.size();
      if (!begin("0") || !line(out)) return run.Cancel();  // the client left: stop the command
    } else if (ev.kind == ExecEvent::kExit) {
      if (!begin("0")) return;
      for (uint8_t ch = 1; ch <= 2; ++ch) {
        if (!carry[ch].empty())
          line(json{{"type", ch == 1 ? "stdout" : "stderr"},
                    {"offset", carry_offset[ch]},
                    {"data", SanitizeUtf8(carry[ch])}});
      }
      json exit = ExitFields(ev.exit);
      exit["type"] = "exit";
      exit["state"] = ev.exit.timed_out ? "timed_out" : !ev.exit.exit_code ? "killed" : "exited";
      line(exit);
      return ex.EndStream();
    } else if (ev.kind == ExecEvent::kError) {
      if (!started) throw ApiError(ev.error);
      return fail(CodeName(ev.error.code()), ev.error.message());
    } else {  // kClosed
      if (!started) throw ApiError(Code::kNotRunning, "the sandbox stopped while the command ran");
      return fail("not_running", "the sandbox stopped");
    }
  }
}

}  // namespace

void AddExecRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/v1/sandboxes/{id}:exec", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    ExecCall req = ReadExec(ex.JsonBody(16 << 20), *s);
    std::shared_ptr<void> stream_slot;
    if (req.stream) stream_slot = OpenStream(ctx, *s);
    io::SandboxIo sandbox = RunningIo(ctx, ex, *s);
    if (req.stream) {
      io::ExecStream run = sandbox.Exec(req.command, req.options);
      RunStream(ex, run, req);
    } else {
      RunJson(ex, sandbox, req);
    }
    ctx.sandboxes.CommandFinished(s);
  });
}

}  // namespace kiln::api
