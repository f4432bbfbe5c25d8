// PandaStack's exec, exec/stream (server-sent events) and /fs routes, on
// the sandbox's agent (engine::AgentClient), as kiln's own routes use it.
#include "api/errors.h"
#include "api/pandastack_routes.h"
#include "api/utf8.h"
#include "common/contract.h"
#include "common/time.h"

namespace kiln::api::pandastack {

using engine::ExecEvent;
using nlohmann::json;

namespace {

constexpr uint64_t kMaxFile = 256ull << 20;  // kiln's own files/content limit

// PandaStack's client turns a server error whose message says "timeout"
// into SandboxTimeout; kiln reports a timed-out command as such.
Status TimedOut(const proto::ExecRequest& req) {
  return Status(Code::kAgentTimeout,
                "command timeout: it ran past its " + std::to_string(req.timeout_ms / 1000) + " s");
}

// When to give up waiting on the agent: the command's timeout and grace.
int64_t AnswerDeadline(const proto::ExecRequest& req) {
  return MonotonicNowMs() + req.timeout_ms + contract::kExecGraceMs;
}

void ExecJson(Exchange& ex, engine::ExecRun& run, const proto::ExecRequest& req) {
  engine::OutputCapture out(req.capture_limit);
  int64_t deadline = AnswerDeadline(req);
  for (ExecEvent ev;;) {
    int64_t left = deadline - MonotonicNowMs();
    if (left <= 0) throw ApiError(TimedOut(req));
    if (!run.Next(&ev, static_cast<int>(std::min<int64_t>(left, 250)))) {
      if (ex.ClientGone()) return run.Cancel();  // nobody reads the result
      continue;
    }
    if (ev.kind == ExecEvent::kOutput) {
      out.Add(ev.stream, ev.data);
    } else if (ev.kind == ExecEvent::kExit) {
      if (ev.exit.timed_out) throw ApiError(TimedOut(req));
      return ex.SendJson(200, json{{"stdout", SanitizeUtf8(out.text(1))},
                                   {"stderr", SanitizeUtf8(out.text(2))},
                                   // A signal's end has no code: -1, the signal named.
                                   {"exit_code", ev.exit.exit_code.value_or(-1)},
                                   {"signal", ev.exit.signal ? json(*ev.exit.signal) : json()},
                                   {"duration_ms", ev.exit.duration_ms},
                                   {"stdout_truncated", ev.exit.stdout_truncated || out.over(1)},
                                   {"stderr_truncated", ev.exit.stderr_truncated || out.over(2)}});
    } else if (ev.kind == ExecEvent::kError) {
      throw ApiError(ev.error);
    } else if (ev.kind == ExecEvent::kClosed) {
      throw ApiError(Code::kNotRunning, "the sandbox stopped while the command ran");
    }
  }
}

// One server-sent event: "event: NAME" and its JSON data, in ASCII (\u
// escapes): requests decodes text/* without a charset as Latin-1.
std::string Event(const char* name, const json& data) {
  return std::string("event: ") + name +
         "\ndata: " + data.dump(-1, ' ', true, json::error_handler_t::replace) + "\n\n";
}

void ExecStream(Exchange& ex, engine::ExecRun& run, const proto::ExecRequest& req) {
  bool started = false;
  auto begin = [&] {
    if (started) return true;
    started = true;
    return ex.BeginStream(200, "text/event-stream; charset=utf-8", {{"Cache-Control", "no-cache"}});
  };
  // After the stream began, an error is its last event.
  auto fail = [&](const Status& s) {
    if (!started) throw ApiError(s);
    ex.WriteChunk(Event("error", json{{"error", s.message()}, {"code", CodeName(s.code())}}));
    ex.EndStream();
  };
  // Bytes of a character split across chunks wait for the rest.
  std::string carry[3];
  int64_t deadline = AnswerDeadline(req);
  for (ExecEvent ev;;) {
    if (MonotonicNowMs() > deadline) return fail(TimedOut(req));
    if (!run.Next(&ev, 250)) {
      if (ex.ClientGone()) return run.Cancel();
      continue;
    }
    if (ev.kind == ExecEvent::kStarted) {
      if (!begin()) return run.Cancel();
    } else if (ev.kind == ExecEvent::kOutput) {
      uint8_t ch = ev.stream;
      std::string text = carry[ch] + ev.data;
      size_t whole = CompleteUtf8Prefix(text);
      carry[ch] = text.substr(whole);
      if (whole == 0) continue;
      json chunk{{"chunk", SanitizeUtf8(std::string_view(text).substr(0, whole))}};
      if (!begin() || !ex.WriteChunk(Event(ch == 1 ? "stdout" : "stderr", chunk)))
        return run.Cancel();  // the client left: stop the command
    } else if (ev.kind == ExecEvent::kExit) {
      if (ev.exit.timed_out) return fail(TimedOut(req));
      if (!begin()) return;
      for (uint8_t ch = 1; ch <= 2; ++ch) {
        if (!carry[ch].empty())
          ex.WriteChunk(Event(ch == 1 ? "stdout" : "stderr", {{"chunk", SanitizeUtf8(carry[ch])}}));
      }
      ex.WriteChunk(Event("exit", json{{"exit_code", ev.exit.exit_code.value_or(-1)},
                                       {"duration_ms", ev.exit.duration_ms}}));
      return ex.EndStream();
    } else if (ev.kind == ExecEvent::kError) {
      return fail(ev.error);
    } else {  // kClosed
      return fail(Status(Code::kNotRunning, "the sandbox stopped while the command ran"));
    }
  }
}

Handler Exec(ApiContext& ctx, bool stream) {
  return Wrap([&ctx, stream](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    proto::ExecRequest req = ReadExec(ex.JsonBody(contract::kCommandMax + 4096));
    req.env = s->spec().env;
    // A JSON answer keeps kiln's cap per stream; a stream has none.
    req.capture_limit = stream ? 0 : contract::ExecOutputCap(req.timeout_ms);
    std::shared_ptr<void> stream_slot;
    if (stream) stream_slot = OpenStream(ctx, *s);
    engine::ExecRun run = RunningAgent(ctx, ex, *s).Exec(req);
    if (stream) {
      ExecStream(ex, run, req);
    } else {
      ExecJson(ex, run, req);
    }
    ctx.sandboxes.CommandFinished(s);
  });
}

void ReadFile(Exchange& ex, const engine::AgentClient& agent, const std::string& path) {
  engine::ContentReader file = ValueOrThrow(agent.ReadFile(path));
  if (!ex.BeginStream(200, "application/octet-stream",
                      {{"x-content-length", std::to_string(file.size())}}))
    return file.Cancel();
  std::string chunk;
  while (file.Next(&chunk, 60000)) {
    if (!ex.WriteChunk(chunk)) return file.Cancel();
  }
  // A read that failed half-way must not look like a short file.
  if (file.status().ok()) return ex.EndStream();
  ex.AbortStream();
}

json WriteFile(Exchange& ex, const engine::AgentClient& agent, const std::string& path) {
  if (auto n = ex.content_length(); n && *n > kMaxFile)
    throw ApiError(Code::kPayloadTooLarge, "files are at most 256 MiB");
  // PandaStack's write makes the folders on the way, as kiln's mkdir -p.
  if (size_t slash = path.rfind('/'); slash != std::string::npos && slash > 0)
    ValueOrThrow(agent.Mkdir(path.substr(0, slash), true));
  engine::FileWriter file = agent.WriteFile(path, 0644);
  uint64_t total = 0;
  for (std::string chunk; ex.ReadBodyChunk(&chunk);) {
    total += chunk.size();
    if (total > kMaxFile) {
      file.Cancel();
      throw ApiError(Code::kPayloadTooLarge, "files are at most 256 MiB");
    }
    ThrowIfError(file.Write(chunk));
  }
  if (ex.body_error()) {
    file.Cancel();
    throw ApiError(Code::kInvalidRequest, "body: the upload ended early");
  }
  if (ValueOrThrow(file.Finish()).size != total)
    throw ApiError(Code::kInternal, "size mismatch writing " + path);
  return json{{"path", path}, {"size", total}};
}

// The entries directly in `path` (the agent's listing includes the folder).
json ListDir(const engine::AgentClient& agent, const std::string& path) {
  std::string self = path.size() > 1 && path.back() == '/' ? path.substr(0, path.size() - 1) : path;
  json entries = json::array();
  for (const auto& e : ValueOrThrow(agent.List(path, 1))) {
    if (e.path != self) entries.push_back(FileInfoJson(e));
  }
  return json{{"path", path}, {"entries", entries}};
}

}  // namespace

void AddIoRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/pandastack/v1/sandboxes/{id}/exec", Exec(ctx, false));
  r.Add("POST", "/pandastack/v1/sandboxes/{id}/exec/stream", Exec(ctx, true));

  r.Add("GET", "/pandastack/v1/sandboxes/{id}/fs", Wrap([&ctx](Exchange& ex) {
          auto s = FindSandbox(ctx, ex);
          auto stream_slot = OpenStream(ctx, *s);
          ReadFile(ex, RunningAgent(ctx, ex, *s), QueryPath(ex));
        }));
  r.Add("PUT", "/pandastack/v1/sandboxes/{id}/fs", Wrap([&ctx](Exchange& ex) {
          auto s = FindSandbox(ctx, ex);
          std::string path = QueryPath(ex);
          ex.SendJson(200, WriteFile(ex, RunningAgent(ctx, ex, *s), path));
        }));
  r.Add("GET", "/pandastack/v1/sandboxes/{id}/fs/dir", Wrap([&ctx](Exchange& ex) {
          auto s = FindSandbox(ctx, ex);
          ex.SendJson(200, ListDir(RunningAgent(ctx, ex, *s), QueryPath(ex)));
        }));
  r.Add("GET", "/pandastack/v1/sandboxes/{id}/fs/stat", Wrap([&ctx](Exchange& ex) {
          auto s = FindSandbox(ctx, ex);
          std::string path = QueryPath(ex);
          proto::FileStat st = ValueOrThrow(RunningAgent(ctx, ex, *s).Stat(path));
          if (!st.exists) throw ApiError(Code::kFileNotFound, path + ": no such file or directory");
          ex.SendJson(200, FileInfoJson(st.entry));
        }));
}

}  // namespace kiln::api::pandastack
