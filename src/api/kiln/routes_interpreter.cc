// A stateful interpreter: POST /v1/sandboxes/{id}/interpreter:run and the
// contexts under /v1/sandboxes/{id}/interpreter/contexts. The contexts are
// kernels inside the sandbox (src/interpreter/interpreter.h); this file
// reads requests and renders contexts and executions.
#include <memory>

#include "api/errors.h"
#include "api/kiln/routes.h"
#include "api/validate.h"
#include "common/contract.h"
#include "common/time.h"
#include "interpreter/interpreter.h"

namespace kiln::api {

using nlohmann::json;

namespace {

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json ContextJson(const interpreter::ContextInfo& c) {
  return json{{"id", c.id},
              {"language", interpreter::LanguageName(c.language)},
              {"cwd", c.cwd},
              {"state", c.state},
              {"executionCount", c.execution_count ? json(*c.execution_count) : json(nullptr)},
              {"createdAt", FormatTime(c.created_ms)},
              {"pid", c.pid ? json(c.pid) : json(nullptr)},
              {"processId", c.process_id}};
}

json ExecutionJson(const interpreter::Execution& e) {
  return json{{"id", e.id},
              {"contextId", e.context_id},
              {"language", interpreter::LanguageName(e.language)},
              {"executionCount", e.execution_count},
              {"status", e.status},
              {"stdout", e.stdout_text},
              {"stderr", e.stderr_text},
              {"results", e.results},
              {"error", e.error},
              {"overflow", e.overflow},
              {"durationMs", e.duration_ms},
              {"contextStarted", e.context_started},
              {"lostBytes", e.lost_bytes}};
}

// A `language` member: python or javascript; 400 naming it otherwise.
std::optional<interpreter::Language> ReadLanguage(FieldReader& f) {
  auto name = f.String("language", 32);
  if (!name) return std::nullopt;
  auto l = interpreter::ParseLanguage(*name);
  if (!l)
    f.Issue("language",
            "must be one of the languages offered: " + std::string(interpreter::kLanguagesOffered));
  return l;
}

// The {c} parameter: a context id; a malformed one cannot exist.
std::string ContextParam(Exchange& ex) {
  const std::string& c = ex.params["c"];
  if (!interpreter::ValidContextId(c))
    throw ApiError(Code::kContextNotFound, "no interpreter context '" + c + "'",
                   json{{"contextId", c}});
  return c;
}

}  // namespace

void AddInterpreterRoutes(Router& r, ApiContext& ctx) {
  // kilnd's one record of contexts: which runs are going on now.
  interpreter::Interpreter* interp = &interpreter::SharedInterpreter();

  r.Add("POST", "/v1/sandboxes/{id}/interpreter:run", [&ctx, interp](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody(16 << 20);
    FieldReader f(body);
    interpreter::RunRequest req;
    req.code = f.String("code", 8 << 20).value_or("");
    if (!f.has("code")) f.Issue("code", "is required");
    req.language = ReadLanguage(f);
    req.context = f.String("context", 63);
    if (req.context && !interpreter::ValidContextId(*req.context))
      f.Issue("context", "must be [a-z0-9][a-z0-9-]*");
    req.timeout_ms = f.Int("timeoutMs", contract::kInterpreterTimeoutMs);
    bool stream = f.Bool("stream").value_or(false);
    // The reference's; a run whose client leaves is always interrupted here.
    f.Bool("interruptOnDisconnect");
    f.Finish();
    std::shared_ptr<void> stream_slot;
    if (stream) stream_slot = OpenStream(ctx, *s);
    io::SandboxIo sandbox = RunningIo(ctx, ex, *s);
    bool begun = false;
    interpreter::EventSink sink = [&](const json& ev) {
      if (ev.is_null()) return !ex.ClientGone();
      if (!stream) return true;
      if (!begun) {
        begun = true;
        if (!ex.BeginStream(200, "application/x-ndjson")) return false;
      }
      return ex.WriteChunk(Dump(ev) + "\n");
    };
    auto run = interp->Run(sandbox, s->id(), req, sink);
    ctx.sandboxes.CommandFinished(s);
    if (!stream) {
      ex.SendJson(200, ExecutionJson(ValueOrThrow(std::move(run))));
      return;
    }
    if (!begun && !run.ok()) throw ApiError(run.status());
    if (!begun && !ex.BeginStream(200, "application/x-ndjson")) return;
    if (run.ok()) {
      ex.WriteChunk(Dump(json{{"k", "execution"}, {"execution", ExecutionJson(*run)}}) + "\n");
    } else {
      ex.WriteChunk(Dump(json{{"k", "failure"},
                              {"code", CodeName(run.status().code())},
                              {"message", run.status().message()},
                              {"status", HttpStatus(run.status().code())}}) +
                    "\n");
    }
    ex.EndStream();
  });

  r.Add("GET", "/v1/sandboxes/{id}/interpreter/contexts", [&ctx, interp](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json data = json::array();
    for (const auto& c : ValueOrThrow(interp->List(RunningIo(ctx, ex, *s))))
      data.push_back(ContextJson(c));
    ex.SendJson(200, json{{"data", data}});
  });

  r.Add("POST", "/v1/sandboxes/{id}/interpreter/contexts", [&ctx, interp](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    interpreter::ContextSpec spec;
    spec.id = f.String("id", 63);
    if (spec.id && !interpreter::ValidContextId(*spec.id))
      f.Issue("id", "must be [a-z0-9][a-z0-9-]*");
    spec.language = ReadLanguage(f).value_or(interpreter::Language::kPython);
    spec.cwd = f.String("cwd", 4096);
    if (spec.cwd && (spec.cwd->empty() || (*spec.cwd)[0] != '/'))
      f.Issue("cwd", "must be absolute");
    if (auto env = f.StringMap("env", 256, 256, 32768)) {
      for (const auto& [k, v] : *env)
        if (!ValidEnvName(k)) f.Issue("env", "'" + k + "' is not a variable name");
      spec.env = *env;
    }
    f.Finish();
    ex.SendJson(200, ContextJson(ValueOrThrow(interp->Create(RunningIo(ctx, ex, *s), spec))));
  });

  r.Add("POST", "/v1/sandboxes/{id}/interpreter/contexts/{c}:restart",
        [&ctx, interp](Exchange& ex) {
          auto s = FindSandbox(ctx, ex);
          std::string c = ContextParam(ex);
          ex.SendJson(200, ContextJson(ValueOrThrow(interp->Restart(RunningIo(ctx, ex, *s), c))));
        });

  r.Add("POST", "/v1/sandboxes/{id}/interpreter/contexts/{c}:interrupt",
        [&ctx, interp](Exchange& ex) {
          auto s = FindSandbox(ctx, ex);
          std::string c = ContextParam(ex);
          bool interrupted = ValueOrThrow(interp->Interrupt(RunningIo(ctx, ex, *s), c));
          ex.SendJson(200, json{{"interrupted", interrupted}});
        });

  r.Add("DELETE", "/v1/sandboxes/{id}/interpreter/contexts/{c}", [&ctx, interp](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string c = ContextParam(ex);
    ex.SendJson(200, json{{"deleted", ValueOrThrow(interp->Remove(RunningIo(ctx, ex, *s), c))}});
  });
}

}  // namespace kiln::api
