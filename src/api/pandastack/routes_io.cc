// PandaStack's exec, exec/stream (server-sent events) and /fs routes, on
// io's SandboxIo (io/sandbox_io.h), as kiln's own routes use it.
#include "api/errors.h"
#include "api/pandastack/routes.h"
#include "api/utf8.h"
#include "common/contract.h"
#include "common/time.h"

namespace kiln::api::pandastack {

using io::ExecEvent;
using nlohmann::json;

namespace {

constexpr uint64_t kMaxFile = 256ull << 20;  // kiln's own files/content limit

// PandaStack's client turns a server error whose message says "timeout"
// into SandboxTimeout; kiln reports a timed-out command as such.
Status TimedOut(const io::ExecOptions& options) {
  return Status(Code::kAgentTimeout, "command timeout: it ran past its " +
                                         std::to_string(options.timeout_ms / 1000) + " s");
}

void ExecJson(Exchange& ex, const io::SandboxIo& sandbox, const ExecRequest& req) {
  io::ExecResult run =
      ValueOrThrow(sandbox.ExecToEnd(req.command, req.options, [&ex] { return ex.ClientGone(); }));
  if (run.end == io::ExecResult::End::kAbandoned) return;  // nobody reads the result
  if (run.end == io::ExecResult::End::kDeadline || run.exit.timed_out)
    throw ApiError(TimedOut(req.options));
  ex.SendJson(200, json{{"stdout", SanitizeUtf8(run.stdout_data)},
                        {"stderr", SanitizeUtf8(run.stderr_data)},
                        // A signal's end has no code: -1, the signal named.
                        {"exit_code", run.exit.exit_code.value_or(-1)},
                        {"signal", run.exit.signal ? json(*run.exit.signal) : json()},
                        {"duration_ms", run.exit.duration_ms},
                        {"stdout_truncated", run.stdout_truncated},
                        {"stderr_truncated", run.stderr_truncated}});
}

// One server-sent event: "event: NAME" and its JSON data, in ASCII (\u
// escapes): requests decodes text/* without a charset as Latin-1.
std::string Event(const char* name, const json& data) {
  return std::string("event: ") + name +
         "\ndata: " + data.dump(-1, ' ', true, json::error_handler_t::replace) + "\n\n";
}

void ExecStream(Exchange& ex, io::ExecStream& run, const ExecRequest& req) {
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
  int64_t deadline = io::AnswerDeadline(req.options);
  for (ExecEvent ev;;) {
    if (MonotonicNowMs() > deadline) return fail(TimedOut(req.options));
    if (!run.Next(&ev, 250)) {
      if (ex.ClientGone()) return run.Cancel();
      continue;
    }
    if (ev.kind == ExecEvent::kStarted) {
      if (!begin()) return run.Cancel();
    } else if (ev.kind == ExecEvent::kOutput) {
      uint8_t ch = static_cast<uint8_t>(ev.stream);
      std::string text = carry[ch] + ev.data;
      size_t whole = CompleteUtf8Prefix(text);
      carry[ch] = text.substr(whole);
      if (whole == 0) continue;
      json chunk{{"chunk", SanitizeUtf8(std::string_view(text).substr(0, whole))}};
      if (!begin() || !ex.WriteChunk(Event(ch == 1 ? "stdout" : "stderr", chunk)))
        return run.Cancel();  // the client left: stop the command
    } else if (ev.kind == ExecEvent::kExit) {
      if (ev.exit.timed_out) return fail(TimedOut(req.options));
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
  return [&ctx, stream](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    ExecRequest req = ReadExec(ex.JsonBody(contract::kCommandMax + 4096));
    // A JSON answer keeps kiln's cap per stream; a stream has none.
    req.options.capture_cap = stream ? 0 : contract::ExecOutputCap(req.options.timeout_ms);
    std::shared_ptr<void> stream_slot;
    if (stream) stream_slot = OpenStream(ctx, *s);
    io::SandboxIo sandbox = RunningIo(ctx, ex, *s);
    if (stream) {
      io::ExecStream run = sandbox.Exec(req.command, req.options);
      ExecStream(ex, run, req);
    } else {
      ExecJson(ex, sandbox, req);
    }
    ctx.sandboxes.CommandFinished(s);
  };
}

void ReadFile(Exchange& ex, const io::SandboxIo& sandbox, const std::string& path) {
  io::Download file = ValueOrThrow(sandbox.ReadFile(path));
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

json WriteFile(Exchange& ex, const io::SandboxIo& sandbox, const std::string& path) {
  if (auto n = ex.content_length(); n && *n > kMaxFile)
    throw ApiError(Code::kPayloadTooLarge, "files are at most 256 MiB");
  // PandaStack's write makes the folders on the way, as kiln's mkdir -p.
  if (size_t slash = path.rfind('/'); slash != std::string::npos && slash > 0)
    ValueOrThrow(sandbox.Mkdir(path.substr(0, slash), true));
  io::FileUpload file = sandbox.WriteFile(path, 0644);
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
  if (ValueOrThrow(file.Finish()) != total)
    throw ApiError(Code::kInternal, "size mismatch writing " + path);
  return json{{"path", path}, {"size", total}};
}

// The entries directly in `path` (the agent's listing includes the folder).
json ListDir(const io::SandboxIo& sandbox, const std::string& path) {
  std::string self = path.size() > 1 && path.back() == '/' ? path.substr(0, path.size() - 1) : path;
  json entries = json::array();
  for (const auto& e : ValueOrThrow(sandbox.List(path, 1))) {
    if (e.path != self) entries.push_back(FileInfoJson(e));
  }
  return json{{"path", path}, {"entries", entries}};
}

}  // namespace

void AddIoRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/pandastack/v1/sandboxes/{id}/exec", Exec(ctx, false));
  r.Add("POST", "/pandastack/v1/sandboxes/{id}/exec/stream", Exec(ctx, true));

  r.Add("GET", "/pandastack/v1/sandboxes/{id}/fs", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    auto stream_slot = OpenStream(ctx, *s);
    ReadFile(ex, RunningIo(ctx, ex, *s), QueryPath(ex));
  });
  r.Add("PUT", "/pandastack/v1/sandboxes/{id}/fs", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = QueryPath(ex);
    ex.SendJson(200, WriteFile(ex, RunningIo(ctx, ex, *s), path));
  });
  r.Add("GET", "/pandastack/v1/sandboxes/{id}/fs/dir", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    ex.SendJson(200, ListDir(RunningIo(ctx, ex, *s), QueryPath(ex)));
  });
  r.Add("GET", "/pandastack/v1/sandboxes/{id}/fs/stat", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = QueryPath(ex);
    io::FileStat st = ValueOrThrow(RunningIo(ctx, ex, *s).Stat(path));
    if (!st.exists) throw ApiError(Code::kFileNotFound, path + ": no such file or directory");
    ex.SendJson(200, FileInfoJson(st.entry));
  });
}

}  // namespace kiln::api::pandastack
