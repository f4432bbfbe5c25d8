// The toolbox's process routes under /daytona/toolbox/{id} (see
// daytona.h): a command run to its end (process/execute), a program in
// python or TypeScript (process/code-run), and where the user's home and
// working folders are.
#include "api/daytona/daytona.h"
#include "api/errors.h"
#include "api/utf8.h"

namespace kiln::api::daytona {

using nlohmann::json;

namespace {

// Daytona's toolbox answers a command's whole output, not kiln's short
// per-call cap: up to a MiB of each stream.
constexpr uint64_t kOutputCap = contract::kExecLongOutputCap;

// Runs `req` to its end: Daytona's {exitCode, result}, result being what
// the command printed (stderr after stdout where the two were not joined).
json RunToEnd(Exchange& ex, const io::SandboxIo& sandbox, ExecRequest req) {
  req.options.capture_cap = kOutputCap;
  io::ExecResult run =
      ValueOrThrow(sandbox.ExecToEnd(req.command, req.options, [&ex] { return ex.ClientGone(); }));
  if (run.end == io::ExecResult::End::kAbandoned) return nullptr;  // nobody reads it
  if (run.end == io::ExecResult::End::kDeadline || run.exit.timed_out)
    throw ApiError(Code::kAgentTimeout, "the command ran past its timeout of " +
                                            std::to_string(req.options.timeout_ms / 1000) + " s");
  // A signal's end has no code: Daytona reads 128 + the signal's number
  // from a shell; -1 says it was a signal without guessing which.
  return json{{"exitCode", run.exit.exit_code.value_or(-1)},
              {"result", SanitizeUtf8(run.stdout_data + run.stderr_data)}};
}

void Execute(ApiContext& ctx, Exchange& ex) {
  auto s = FindSandbox(ctx, ex);
  ExecRequest req = ReadExecute(ex.JsonBody(contract::kCommandMax + 64 * 1024));
  // One stream, in the order written, as Daytona's daemon answers.
  req.command.command = "exec 2>&1\n" + *req.command.command;
  json answer = RunToEnd(ex, RunningIo(ctx, ex, *s), std::move(req));
  if (!answer.is_null()) ex.SendJson(200, answer);
  ctx.sandboxes.CommandFinished(s);
}

void CodeRun(ApiContext& ctx, Exchange& ex) {
  auto s = FindSandbox(ctx, ex);
  ExecRequest req = ReadCodeRun(ex.JsonBody(contract::kCommandMax + 64 * 1024));
  json answer = RunToEnd(ex, RunningIo(ctx, ex, *s), std::move(req));
  if (answer.is_null()) return;
  answer["artifacts"] = json{{"stdout", answer["result"]}, {"charts", json::array()}};
  ex.SendJson(200, answer);
  ctx.sandboxes.CommandFinished(s);
}

}  // namespace

void AddProcessRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/daytona/toolbox/{id}/process/execute",
        [&ctx](Exchange& ex) { Execute(ctx, ex); });
  r.Add("POST", "/daytona/toolbox/{id}/process/code-run",
        [&ctx](Exchange& ex) { CodeRun(ctx, ex); });
  r.Add("GET", "/daytona/toolbox/{id}/user-home-dir", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    ex.SendJson(200, json{{"dir", s->spec().run_as.home}});
  });
  r.Add("GET", "/daytona/toolbox/{id}/work-dir", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    ex.SendJson(200, json{{"dir", s->spec().run_as.workdir}});
  });
}

}  // namespace kiln::api::daytona
