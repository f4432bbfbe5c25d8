// A stateful interpreter: POST /v1/sandboxes/{id}/interpreter:run and the
// contexts under /v1/sandboxes/{id}/interpreter/contexts. The contexts are
// kernels inside the sandbox (src/interpreter/interpreter.h); this file
// runs code in them, streamed or answered whole.
#include <memory>

#include "api/errors.h"
#include "api/kiln/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/requests.h"
#include "api/kiln/routes.h"
#include "interpreter/interpreter.h"

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

void AddInterpreterRoutes(Router& r, ApiContext& ctx) {
  // kilnd's one record of contexts: which runs are going on now.
  interpreter::Interpreter* interp = &interpreter::SharedInterpreter();

  r.Add("POST", "/v1/sandboxes/{id}/interpreter:run", [&ctx, interp](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    InterpreterRun req = ReadInterpreterRun(ex.JsonBody(16 << 20));
    bool stream = req.stream;
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
    auto run = interp->Run(sandbox, s->id(), req.run, sink);
    ctx.sandboxes.CommandFinished(s);
    if (!stream) {
      ex.SendJson(200, ExecutionJson(ValueOrThrow(std::move(run))));
      return;
    }
    if (!begun && !run.ok()) throw ApiError(run.status());
    if (!begun && !ex.BeginStream(200, "application/x-ndjson")) return;
    if (run.ok()) {
      ex.WriteChunk(Dump(ExecutionEventJson(*run)) + "\n");
    } else {
      ex.WriteChunk(Dump(FailureJson(run.status())) + "\n");
    }
    ex.EndStream();
  });

  r.Add("GET", "/v1/sandboxes/{id}/interpreter/contexts", [&ctx, interp](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json data = json::array();
    for (const auto& c : ValueOrThrow(interp->List(RunningIo(ctx, ex, *s))))
      data.push_back(InterpreterContextJson(c));
    ex.SendJson(200, ListJson(std::move(data)));
  });

  r.Add("POST", "/v1/sandboxes/{id}/interpreter/contexts", [&ctx, interp](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    interpreter::ContextSpec spec = ReadContextSpec(ex.JsonBody());
    ex.SendJson(200,
                InterpreterContextJson(ValueOrThrow(interp->Create(RunningIo(ctx, ex, *s), spec))));
  });

  r.Add(
      "POST", "/v1/sandboxes/{id}/interpreter/contexts/{c}:restart", [&ctx, interp](Exchange& ex) {
        auto s = FindSandbox(ctx, ex);
        std::string c = ReadContextParam(ex);
        ex.SendJson(
            200, InterpreterContextJson(ValueOrThrow(interp->Restart(RunningIo(ctx, ex, *s), c))));
      });

  r.Add("POST", "/v1/sandboxes/{id}/interpreter/contexts/{c}:interrupt",
        [&ctx, interp](Exchange& ex) {
          auto s = FindSandbox(ctx, ex);
          std::string c = ReadContextParam(ex);
          bool interrupted = ValueOrThrow(interp->Interrupt(RunningIo(ctx, ex, *s), c));
          ex.SendJson(200, json{{"interrupted", interrupted}});
        });

  r.Add("DELETE", "/v1/sandboxes/{id}/interpreter/contexts/{c}", [&ctx, interp](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string c = ReadContextParam(ex);
    ex.SendJson(200, json{{"deleted", ValueOrThrow(interp->Remove(RunningIo(ctx, ex, *s), c))}});
  });
}

}  // namespace kiln::api::v1
