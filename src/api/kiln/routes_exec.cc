// POST /v1/sandboxes/{id}:exec -- a command to completion, answered as one
// CommandResult or streamed as NDJSON events.
#include "api/errors.h"
#include "api/kiln/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/requests.h"
#include "api/kiln/routes.h"
#include "api/utf8.h"
#include "common/time.h"

namespace kiln::api::v1 {

using io::ExecEvent;
using io::OutputStream;
using nlohmann::json;

namespace {

void RunJson(Exchange& ex, const io::SandboxIo& sandbox, const ExecRequest& req) {
  io::ExecResult run =
      ValueOrThrow(sandbox.ExecToEnd(req.command, req.options, [&ex] { return ex.ClientGone(); }));
  if (run.end == io::ExecResult::End::kAbandoned) return;
  if (run.end == io::ExecResult::End::kDeadline)
    throw ApiError(Code::kAgentTimeout, "the command did not finish within its timeout");
  ex.SendJson(200, ExecResultJson(run));
}

void RunStream(Exchange& ex, io::ExecStream& run, const ExecRequest& req) {
  auto line = [&](const json& j) {
    return ex.WriteChunk(j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
  };
  bool started = false;
  // Answers 200 and the start event once (a command that failed to start
  // reports on stderr before any start event: its processId is "0").
  auto begin = [&](const std::string& pid) {
    if (started) return true;
    started = true;
    return ex.BeginStream(200, "application/x-ndjson") && line(ExecStartEventJson(pid));
  };
  // An error after the stream began: its last line.
  auto fail = [&](std::string_view code, std::string_view message) {
    line(StreamErrorJson(code, message));
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
        if (!begin("0") || !ex.WriteChunk(Base64OutputEventLine(ev.stream, offset, ev.data)))
          return run.Cancel();
        offset += ev.data.size();
        continue;
      }
      uint64_t first = carry[ch].empty() ? offset : carry_offset[ch];
      std::string text = carry[ch] + ev.data;
      size_t whole = CompleteUtf8Prefix(text);
      carry[ch] = text.substr(whole);
      carry_offset[ch] = first + whole;
      json out = OutputEventJson(ev.stream, first, std::string_view(text).substr(0, whole));
      offset += ev.data.size();
      if (!begin("0") || !line(out)) return run.Cancel();  // the client left: stop the command
    } else if (ev.kind == ExecEvent::kExit) {
      if (!begin("0")) return;
      for (uint8_t ch = 1; ch <= 2; ++ch) {
        if (!carry[ch].empty())
          line(OutputEventJson(static_cast<OutputStream>(ch), carry_offset[ch], carry[ch]));
      }
      line(ExecExitEventJson(ev.exit));
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
    ExecRequest req = ReadExec(ex.JsonBody(16 << 20), *s);
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

}  // namespace kiln::api::v1
