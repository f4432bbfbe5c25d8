// Daytona's sessions under /daytona/toolbox/{id}/process/session (see
// daytona.h). A session is a folder in the sandbox holding its working
// folder and exported variables; each command is a kiln background
// process, so kiln's process table keeps its output and exit code, and
// the front keeps nothing. A command runs in bash as
//   cd <the session's folder>; . <its variables>; eval CMD;
//   save the folder and variables; exit with CMD's code
// so `cd` and `export` carry to the session's next command, as in
// Daytona's own. The process's argv names its session and command, which
// is how a command is found again, and how it is told apart from a
// process the session did not start.
#include "api/daytona/daytona.h"
#include "api/errors.h"
#include "api/utf8.h"
#include "common/time.h"

namespace kiln::api::daytona {

using nlohmann::json;

namespace {

constexpr const char* kSessionsDir = "/tmp/.daytona-sessions";
constexpr const char* kTag = "kiln-daytona-session";
// $1 the session's id, $2 the command.
constexpr const char* kWrapper =
    "d=/tmp/.daytona-sessions/$1\n"
    "cd \"$(cat \"$d/cwd\" 2>/dev/null || pwd)\" 2>/dev/null\n"
    ". \"$d/env\" 2>/dev/null\n"
    "eval \"$2\"\n"
    "rc=$?\n"
    "pwd > \"$d/cwd\" 2>/dev/null\n"
    "export -p > \"$d/env\" 2>/dev/null\n"
    "exit $rc\n";
// How long a synchronous exec waits for its command, at most.
constexpr int64_t kSyncWaitMs = 24LL * 3600 * 1000;

std::string SessionDir(const std::string& sid) { return std::string(kSessionsDir) + "/" + sid; }

std::string SessionOf(Exchange& ex) { return ParseSessionId(ex.params["sid"], "path.sessionId"); }

// The session's command in `p`'s argv, if `p` is one of `sid`'s.
std::optional<std::string> CommandOf(const io::ProcessInfo& p, const std::string& sid) {
  const auto& a = p.argv;
  if (a.size() != 6 || a[0] != "/bin/bash" || a[3] != kTag || a[4] != sid) return std::nullopt;
  return a[5];
}

void RequireSession(const io::SandboxIo& sandbox, const std::string& sid) {
  io::FileStat st = ValueOrThrow(sandbox.Stat(SessionDir(sid)));
  if (!st.exists) throw ApiError(Code::kNotFound, "session " + sid + " was not found");
}

io::ProcessInfo FindCommand(const io::SandboxIo& sandbox, const std::string& sid,
                            const std::string& cid) {
  auto p = sandbox.ProcessGet(cid);
  if (!p.ok() || !CommandOf(*p, sid))
    throw ApiError(Code::kNotFound, "command " + cid + " was not found in session " + sid);
  return *p;
}

json CommandJson(const io::ProcessInfo& p, const std::string& command) {
  json out{{"id", p.id}, {"command", command}};
  if (p.state != io::ProcessState::kRunning) out["exitCode"] = p.exit_code.value_or(-1);
  return out;
}

// The command's whole output kept by kiln: {output, stdout, stderr}.
json Logs(const io::SandboxIo& sandbox, const std::string& cid) {
  std::string out, err, both;
  uint64_t cursor = 0;
  for (int pages = 0; pages < 64; ++pages) {
    io::OutputPage page = ValueOrThrow(sandbox.ProcessOutput(cid, cursor, 0, 30000));
    for (const auto& c : page.chunks) {
      (c.stream == io::OutputStream::kStdout ? out : err) += c.data;
      both += c.data;
    }
    if (page.chunks.empty() || page.next_cursor == cursor) break;
    cursor = page.next_cursor;
  }
  return json{
      {"output", SanitizeUtf8(both)}, {"stdout", SanitizeUtf8(out)}, {"stderr", SanitizeUtf8(err)}};
}

void CreateSession(ApiContext& ctx, Exchange& ex) {
  auto s = FindSandbox(ctx, ex);
  json body = ex.JsonBody();  // FieldReader keeps a reference
  FieldReader f(body);
  auto raw = f.String("sessionId", 256);
  if (!raw) f.Issue("sessionId", "is required");
  f.Finish();
  std::string sid = ParseSessionId(*raw, "body.sessionId");
  io::SandboxIo sandbox = RunningIo(ctx, ex, *s);
  // Made by the sandbox's user, so its commands may write the folder.
  io::Command mk;
  mk.argv = std::vector<std::string>{
      "/bin/sh", "-c",
      "umask 077; mkdir -p " + std::string(kSessionsDir) + " && mkdir \"$0\" && : > \"$0/env\"",
      SessionDir(sid)};
  io::ExecOptions options;
  options.timeout_ms = 30000;
  io::ExecResult made = ValueOrThrow(sandbox.ExecToEnd(mk, options, [] { return false; }));
  if (made.exit.exit_code != 0) {
    if (ValueOrThrow(sandbox.Stat(SessionDir(sid))).exists)
      throw ApiError(Code::kFileExists, "session " + sid + " already exists");
    throw ApiError(Code::kIoError, "cannot make session " + sid + ": " + made.stderr_data);
  }
  ex.SendBytes(201, "", "text/plain");
}

void ExecInSession(ApiContext& ctx, Exchange& ex) {
  auto s = FindSandbox(ctx, ex);
  std::string sid = SessionOf(ex);
  SessionExec req = ReadSessionExec(ex.JsonBody(contract::kCommandMax + 4096));
  io::SandboxIo sandbox = RunningIo(ctx, ex, *s);
  RequireSession(sandbox, sid);
  io::ProcessSpec spec;
  spec.command.argv = std::vector<std::string>{"/bin/bash", "-c", kWrapper, kTag, sid, req.command};
  io::ProcessInfo p = ValueOrThrow(sandbox.ProcessStart(spec));
  if (req.run_async) {
    ex.SendJson(202, json{{"cmdId", p.id}});
    return;
  }
  // Waits for its end in short looks, so that a client that left is seen.
  int64_t until = MonotonicNowMs() + kSyncWaitMs;
  while (p.state == io::ProcessState::kRunning) {
    if (ex.ClientGone() || MonotonicNowMs() > until) return;
    io::OutputPage page = ValueOrThrow(sandbox.ProcessOutput(p.id, p.output_bytes, 1000, 10000));
    p = page.process;
  }
  json answer = Logs(sandbox, p.id);
  answer["cmdId"] = p.id;
  answer["exitCode"] = p.exit_code.value_or(-1);
  ex.SendJson(200, answer);
  ctx.sandboxes.CommandFinished(s);
}

json SessionJson(const io::SandboxIo& sandbox, const std::string& sid) {
  json commands = json::array();
  for (const auto& p : ValueOrThrow(sandbox.ProcessList()))
    if (auto command = CommandOf(p, sid)) commands.push_back(CommandJson(p, *command));
  return json{{"sessionId", sid}, {"commands", commands}};
}

void DeleteSession(ApiContext& ctx, Exchange& ex) {
  auto s = FindSandbox(ctx, ex);
  std::string sid = SessionOf(ex);
  io::SandboxIo sandbox = RunningIo(ctx, ex, *s);
  RequireSession(sandbox, sid);
  for (const auto& p : ValueOrThrow(sandbox.ProcessList()))
    if (p.state == io::ProcessState::kRunning && CommandOf(p, sid))
      (void)sandbox.ProcessSignal(p.id, "SIGKILL");
  ValueOrThrow(sandbox.Remove(SessionDir(sid), true));
  ex.SendBytes(204, "", "text/plain");
}

}  // namespace

void AddSessionRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/daytona/toolbox/{id}/process/session",
        [&ctx](Exchange& ex) { CreateSession(ctx, ex); });
  r.Add("GET", "/daytona/toolbox/{id}/process/session", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    io::SandboxIo sandbox = RunningIo(ctx, ex, *s);
    json sessions = json::array();
    io::FileStat st = ValueOrThrow(sandbox.Stat(kSessionsDir));
    if (st.exists) {
      for (const auto& e : ValueOrThrow(sandbox.List(kSessionsDir, 1))) {
        if (e.type != io::FileType::kDirectory || e.path == kSessionsDir) continue;
        sessions.push_back(SessionJson(sandbox, e.name));
      }
    }
    ex.SendJson(200, sessions);
  });
  r.Add("GET", "/daytona/toolbox/{id}/process/session/{sid}", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string sid = SessionOf(ex);
    io::SandboxIo sandbox = RunningIo(ctx, ex, *s);
    RequireSession(sandbox, sid);
    ex.SendJson(200, SessionJson(sandbox, sid));
  });
  r.Add("DELETE", "/daytona/toolbox/{id}/process/session/{sid}",
        [&ctx](Exchange& ex) { DeleteSession(ctx, ex); });
  r.Add("POST", "/daytona/toolbox/{id}/process/session/{sid}/exec",
        [&ctx](Exchange& ex) { ExecInSession(ctx, ex); });
  r.Add("GET", "/daytona/toolbox/{id}/process/session/{sid}/command/{cid}", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string sid = SessionOf(ex);
    io::SandboxIo sandbox = RunningIo(ctx, ex, *s);
    io::ProcessInfo p = FindCommand(sandbox, sid, ex.params["cid"]);
    ex.SendJson(200, CommandJson(p, *CommandOf(p, sid)));
  });
  r.Add(
      "GET", "/daytona/toolbox/{id}/process/session/{sid}/command/{cid}/logs",
      [&ctx](Exchange& ex) {
        auto s = FindSandbox(ctx, ex);
        std::string sid = SessionOf(ex);
        if (auto follow = ex.Query("follow"); follow && *follow == "true")
          throw ApiError(Unsupported("following a command's logs",
                                     "poll GET .../command/{cmdId} and read its logs at the end"));
        io::SandboxIo sandbox = RunningIo(ctx, ex, *s);
        io::ProcessInfo p = FindCommand(sandbox, sid, ex.params["cid"]);
        ex.SendJson(200, Logs(sandbox, p.id));
      });
}

}  // namespace kiln::api::daytona
