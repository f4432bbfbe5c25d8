// POST /v1/sandboxes/{id}:exec -- a command to completion, answered as one
// CommandResult or streamed as NDJSON events.
#include "api/errors.h"
#include "api/routes.h"
#include "api/utf8.h"
#include "api/validate.h"
#include "common/base64.h"
#include "common/contract.h"
#include "common/time.h"

namespace kiln::api {

using engine::ExecEvent;
using nlohmann::json;

namespace {

struct ExecCall {
  proto::ExecRequest agent;
  std::optional<std::string> stdin_bytes;
  bool stream = false;
  bool base64 = false;
};

ExecCall ReadExec(const json& body, const control::Sandbox& s) {
  FieldReader f(body);
  ExecCall r;
  ReadCommandFields(f, s, &r.agent);
  auto text = f.String("stdin", contract::kStdinMax);
  auto b64 = f.String("stdinBase64", contract::kStdinBase64Max);
  if (text && b64) f.Issue("stdin", "give either stdin or stdinBase64, not both");
  if (text) r.stdin_bytes = *text;
  if (b64) {
    r.stdin_bytes = Base64Decode(*b64);
    if (!r.stdin_bytes) f.Issue("stdinBase64", "is not valid base64");
  }
  r.agent.timeout_ms = f.Int("timeoutMs", contract::kExecTimeoutMs);
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
  r.agent.capture_limit = r.stream ? 0 : contract::ExecOutputCap(r.agent.timeout_ms);
  r.agent.kill_past_limit = stop_at_cap;
  return r;
}

// When to give up on an answer: the command's own timeout and some grace.
int64_t AnswerDeadline(const ExecCall& req) {
  return MonotonicNowMs() + req.agent.timeout_ms + contract::kExecGraceMs;
}

json ExitFields(const proto::ExecExit& exit) {
  return json{{"exitCode", exit.exit_code ? json(*exit.exit_code) : json(nullptr)},
              {"signal", exit.signal ? json(*exit.signal) : json(nullptr)},
              {"timedOut", exit.timed_out},
              {"durationMs", exit.duration_ms}};
}

void RunJson(Exchange& ex, engine::ExecRun& run, const ExecCall& req) {
  engine::OutputCapture out(req.agent.capture_limit);
  std::string pid;
  int64_t deadline = AnswerDeadline(req);
  for (ExecEvent ev;;) {
    int64_t left = deadline - MonotonicNowMs();
    if (left <= 0)
      throw ApiError(Code::kAgentTimeout, "the command did not finish within its timeout");
    if (!run.Next(&ev, static_cast<int>(std::min<int64_t>(left, 250)))) {
      // Nobody will read the result: stop the command and all it started.
      if (ex.ClientGone()) return run.Cancel();
      continue;
    }
    switch (ev.kind) {
      case ExecEvent::kStarted:
        pid = std::to_string(ev.pid);
        break;
      case ExecEvent::kOutput:
        out.Add(ev.stream, ev.data);
        break;
      case ExecEvent::kExit: {
        json result = ExitFields(ev.exit);
        result["stdout"] = SanitizeUtf8(out.text(1));
        result["stderr"] = SanitizeUtf8(out.text(2));
        result["stdoutTruncated"] = ev.exit.stdout_truncated || out.over(1);
        result["stderrTruncated"] = ev.exit.stderr_truncated || out.over(2);
        result["processId"] = pid;
        return ex.SendJson(200, result);
      }
      case ExecEvent::kError:
        throw ApiError(ev.error);
      case ExecEvent::kClosed:
        throw ApiError(Code::kNotRunning, "the sandbox stopped while the command ran");
    }
  }
}

// One base64 output event as an NDJSON line. The payload is spliced into the
// serialized envelope: base64 needs no escaping, and running a 64 KiB chunk
// through the serializer's character-by-character escaping took most of
// kilnd's CPU when streaming.
std::string Base64EventLine(uint8_t channel, uint64_t offset, std::string_view data) {
  json ev{{"type", channel == 1 ? "stdout" : "stderr"},
          {"offset", offset},
          {"base64", true},
          {"data", ""}};
  std::string line = ev.dump();
  line.insert(line.find("\"data\":\"\"") + 8, Base64Encode(data));
  line += '\n';
  return line;
}

void RunStream(Exchange& ex, engine::ExecRun& run, const ExecCall& req) {
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
  int64_t deadline = AnswerDeadline(req);
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
      uint8_t ch = ev.stream;
      if (req.base64) {
        if (!begin("0") || !ex.WriteChunk(Base64EventLine(ch, offset, ev.data)))
          return run.Cancel();
        offset += ev.data.size();
        continue;
      }
      uint64_t first = carry[ch].empty() ? offset : carry_offset[ch];
      std::string text = carry[ch] + ev.data;
      size_t whole = CompleteUtf8Prefix(text);
      carry[ch] = text.substr(whole);
      carry_offset[ch] = first + whole;
      json out{{"type", ch == 1 ? "stdout" : "stderr"},
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
    engine::ExecRun run = RunningAgent(ctx, ex, *s).Exec(req.agent, req.stdin_bytes);
    if (req.stream) {
      RunStream(ex, run, req);
    } else {
      RunJson(ex, run, req);
    }
    ctx.sandboxes.CommandFinished(s);
  });
}

}  // namespace kiln::api
