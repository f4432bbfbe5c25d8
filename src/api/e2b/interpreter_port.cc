// The code interpreter's port (49999) of E2B's sandboxes (see e2b.h), on
// kiln's own interpreter (src/interpreter, shared with /v1's routes):
//   POST /execute {code, context_id?, language?, env_vars?}: E2B's NDJSON
//     stream, one line per stdout, stderr, result and error, then
//     end_of_execution and number_of_executions;
//   GET /contexts, POST /contexts {language?, cwd?},
//   DELETE /contexts/{id}, POST /contexts/{id}/restart;
//   GET /health.
// A context is a kiln interpreter context (a kernel process in the
// sandbox); the default one of a language is kiln's ("python").
#include <algorithm>
#include <array>
#include <map>
#include <thread>

#include "api/e2b/e2b.h"
#include "api/e2b/envd/rpc.h"
#include "api/e2b/routes.h"
#include "api/e2b/sandbox_plane.h"
#include "api/errors.h"
#include "api/validate.h"
#include "common/contract.h"
#include "common/ids.h"
#include "common/strings.h"
#include "common/time.h"
#include "interpreter/interpreter.h"

namespace kiln::api::e2b {

using nlohmann::json;

namespace interpreter_port {
namespace {

// The code and the body that carries it, at most.
constexpr size_t kExecuteBodyMax = 16 << 20;
constexpr size_t kExecuteCodeMax = 8 << 20;

// kiln's result MIME types and E2B's keys for them.
struct MimeKey {
  const char* mime;
  const char* key;
};
constexpr std::array<MimeKey, 12> kMimeKeys{{
    {"text/plain", "text"},
    {"text/html", "html"},
    {"text/markdown", "markdown"},
    {"image/svg+xml", "svg"},
    {"image/png", "png"},
    {"image/jpeg", "jpeg"},
    {"application/pdf", "pdf"},
    {"text/latex", "latex"},
    {"application/json", "json"},
    {"application/javascript", "javascript"},
    // A DataFrame's columns (the Jupyter kernel's, src/interpreter/kernel_jupyter.py).
    {"application/vnd.kiln.data+json", "data"},
    // A figure's chart, by e2b_charts (the same bridge).
    {"application/vnd.kiln.chart+json", "chart"},
}};

std::string DumpLine(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// How long a run waits for its busy context (the stream slot it holds
// bounds how many wait at once).
constexpr int64_t kBusyWaitMs = 60000;
// How long a run that lost its kernel waits to see its sandbox stopping.
constexpr int64_t kStopSettleMs = 3000;

// E2B's language names onto kiln's kernels (its server's normalize_language:
// any case, js and ts for short).
std::optional<interpreter::Language> ReadE2bLanguage(FieldReader& f) {
  auto name = f.String("language", 32);
  if (!name) return std::nullopt;
  std::string n = AsciiLower(Trim(*name, " \t"));
  if (n.empty()) return interpreter::Language::kPython;
  if (n == "js") n = "javascript";
  if (n == "ts") n = "typescript";
  if (auto language = interpreter::ParseLanguage(n)) return language;
  throw ApiError(Code::kNotSupported,
                 "language '" + name->substr(0, 32) + "' is not offered by kiln's interpreter: " +
                     std::string(interpreter::kLanguagesOffered) + " (js, ts for short)",
                 json{{"feature", "language " + name->substr(0, 32)}});
}

json E2bContextJson(const interpreter::ContextInfo& c) {
  return json{{"id", c.id}, {"language", interpreter::LanguageName(c.language)}, {"cwd", c.cwd}};
}

// The {id} after /contexts/: a kiln context id, else one that cannot exist.
std::string ContextId(const std::string& id) {
  if (!interpreter::ValidContextId(id))
    throw ApiError(Code::kContextNotFound, "context '" + id.substr(0, 64) + "' was not found",
                   json{{"contextId", id.substr(0, 64)}});
  return id;
}

// Whether a run ended because its sandbox is stopping: it lost its kernel
// (a stop ends the sandbox's processes before its state says so, so the
// state is given a moment to follow).
bool StoppedUnder(const Result<interpreter::Execution>& run, const control::Sandbox& sandbox) {
  if (run.ok() ? run->status != "lost" : run.status().code() != Code::kNotRunning)
    return !run.ok() && !sandbox.running();
  for (int64_t until = MonotonicNowMs() + kStopSettleMs;
       sandbox.running() && MonotonicNowMs() < until;)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return !sandbox.running();
}

void Execute(ApiContext& ctx, Exchange& ex, const SandboxTarget& t) {
  json body = WithoutNulls(ex.JsonBody(kExecuteBodyMax));
  FieldReader f(body);
  interpreter::RunRequest req;
  req.code = f.String("code", kExecuteCodeMax).value_or("");
  if (!f.has("code")) f.Issue("code", "is required");
  req.language = ReadE2bLanguage(f);
  if (auto c = f.String("context_id", 63)) {
    if (!interpreter::ValidContextId(*c)) f.Issue("context_id", "is not a context's id");
    req.context = *c;
  }
  if (auto env = f.StringMap("env_vars", 256, 256, 32768)) {
    for (const auto& [k, v] : *env)
      if (!ValidEnvName(k)) f.Issue("env_vars", "'" + k.substr(0, 64) + "' is not a variable name");
    req.env = *env;
  }
  f.Finish();
  // E2B's contexts start in the user's home, as its commands do.
  req.cwd = E2bHomeOf(t.sandbox->spec().run_as);
  // The client bounds the run (its timeout closes the connection, which
  // interrupts the code); kiln's cap is the last resort.
  req.timeout_ms = contract::kInterpreterTimeoutMs.max;
  auto stream_slot = OpenStream(ctx, *t.sandbox);
  io::SandboxIo sandbox = RunningIo(ctx, ex, *t.sandbox);
  bool begun = false;
  auto begin = [&] {
    if (!begun) {
      begun = true;
      return ex.BeginStream(200, "application/x-ndjson");
    }
    return true;
  };
  interpreter::EventSink sink = [&](const json& ev) {
    if (ev.is_null()) return !ex.ClientGone();
    json line = ExecuteLine(ev, NowMs() * 1000000);
    if (line.is_null()) return !ex.ClientGone();
    return begin() && ex.WriteChunk(DumpLine(line) + "\n");
  };
  auto run = interpreter::SharedInterpreter().Run(sandbox, t.sandbox->id(), req, sink);
  // E2B's server runs a context's executions one after another: a run that
  // finds its context busy (the one before still being interrupted after
  // its client left, say) waits for it while its own client waits.
  for (int64_t until = MonotonicNowMs() + kBusyWaitMs;
       !begun && !run.ok() && run.status().code() == Code::kBusy && MonotonicNowMs() < until &&
       !ex.ClientGone();) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    run = interpreter::SharedInterpreter().Run(sandbox, t.sandbox->id(), req, sink);
  }
  ctx.sandboxes.CommandFinished(t.sandbox);
  // A sandbox stopped under the run (killed, its lease over): E2B's
  // connection breaks with its sandbox, and its SDKs tell a kill by that
  // (a broken stream, then is_running() false).
  if (StoppedUnder(run, *t.sandbox)) {
    if (begin()) ex.AbortStream();
    return;
  }
  // A refusal before the run began is an error answer the SDKs raise.
  if (!begun && !run.ok()) throw ApiError(run.status());
  if (!begin()) return;
  if (run.ok()) {
    // A run that timed out or lost its kernel ends with an error line.
    if (run->error.is_null() && run->status != "ok" && run->status != "error") {
      std::string why = run->status == "timeout"       ? "the run reached kiln's time limit"
                        : run->status == "interrupted" ? "the run was interrupted"
                                                       : "the kernel ended during the run";
      ex.WriteChunk(
          DumpLine(json{{"type", "error"},
                        {"name", run->status == "timeout" ? "TimeoutError" : "KernelError"},
                        {"value", why},
                        {"traceback", ""}}) +
          "\n");
    }
    ex.WriteChunk(DumpLine(json{{"type", "end_of_execution"}}) + "\n");
    ex.WriteChunk(DumpLine(json{{"type", "number_of_executions"},
                                {"execution_count", run->execution_count}}) +
                  "\n");
  } else {
    ex.WriteChunk(DumpLine(json{{"type", "error"},
                                {"name", CodeName(run.status().code())},
                                {"value", run.status().message()},
                                {"traceback", ""}}) +
                  "\n");
  }
  ex.EndStream();
}

void Contexts(ApiContext& ctx, Exchange& ex, const SandboxTarget& t) {
  auto& interp = interpreter::SharedInterpreter();
  const std::string& path = t.path;
  const std::string& method = ex.method();
  if (path == "/contexts" && method == "GET") {
    // As E2B's server lists them: its two default contexts (made with the
    // sandbox) first, then the others as they were created. kiln starts a
    // default on its first run and lists it before that, as E2B's clients
    // expect to find it.
    std::vector<interpreter::ContextInfo> others;
    std::map<std::string, json> defaults;
    for (auto& c : ValueOrThrow(interp.List(RunningIo(ctx, ex, *t.sandbox)))) {
      if (c.state == "dead") continue;
      if (c.id == "python" || c.id == "javascript")
        defaults[c.id] = E2bContextJson(c);
      else
        others.push_back(std::move(c));
    }
    std::stable_sort(others.begin(), others.end(),
                     [](const auto& a, const auto& b) { return a.created_ms < b.created_ms; });
    json list = json::array();
    for (auto language : {interpreter::Language::kPython, interpreter::Language::kJavaScript}) {
      std::string id(interpreter::LanguageName(language));
      auto started = defaults.find(id);
      list.push_back(
          started != defaults.end()
              ? started->second
              : json{{"id", id}, {"language", id}, {"cwd", E2bHomeOf(t.sandbox->spec().run_as)}});
    }
    for (const auto& c : others) list.push_back(E2bContextJson(c));
    ex.SendJson(200, list);
    return;
  }
  if (path == "/contexts" && method == "POST") {
    json body = WithoutNulls(ex.JsonBody());
    FieldReader f(body);
    interpreter::ContextSpec spec;
    spec.id = NewUuid();  // E2B's contexts are many per language
    spec.language = ReadE2bLanguage(f).value_or(interpreter::Language::kPython);
    spec.cwd = f.String("cwd", 4096);
    if (spec.cwd && (spec.cwd->empty() || (*spec.cwd)[0] != '/'))
      f.Issue("cwd", "must be an absolute path");
    f.Finish();
    if (!spec.cwd) spec.cwd = E2bHomeOf(t.sandbox->spec().run_as);
    ex.SendJson(200,
                E2bContextJson(ValueOrThrow(interp.Create(RunningIo(ctx, ex, *t.sandbox), spec))));
    return;
  }
  std::string rest = path.substr(std::string("/contexts/").size());
  if (rest.ends_with("/restart") && method == "POST") {
    std::string id = ContextId(rest.substr(0, rest.size() - 8));
    ValueOrThrow(interp.Restart(RunningIo(ctx, ex, *t.sandbox), id));
    ex.SendJson(200, json::object());
    return;
  }
  if (rest.find('/') == std::string::npos && method == "DELETE") {
    ValueOrThrow(interp.Remove(RunningIo(ctx, ex, *t.sandbox), ContextId(rest)));
    ex.SendBytes(204, "", "application/json");
    return;
  }
  throw ApiError(Code::kRouteNotFound,
                 method + " " + path.substr(0, 256) + " is not served on the interpreter port");
}

}  // namespace
}  // namespace interpreter_port

json ResultLine(bool main, const json& data) {
  using interpreter_port::kMimeKeys;
  using interpreter_port::MimeKey;
  json line{{"type", "result"}, {"is_main_result", main}};
  json extra = json::object();
  if (data.is_object()) {
    for (const auto& [mime, value] : data.items()) {
      const MimeKey* known = nullptr;
      for (const auto& m : kMimeKeys)
        if (mime == m.mime) known = &m;
      if (known)
        line[known->key] = value;
      else
        extra[mime] = value;
    }
  }
  if (!extra.empty()) line["extra"] = extra;
  // E2B's server takes a string's quotes off its text (its Result model):
  // `os.getenv("K")` is `v`, not `'v'`.
  if (line.contains("text") && line["text"].is_string()) {
    std::string& text = line["text"].get_ref<std::string&>();
    if (!text.empty() && (text.front() == '\'' || text.front() == '"') &&
        text.back() == text.front())
      text = text.size() < 2 ? "" : text.substr(1, text.size() - 2);
  }
  return line;
}

json ExecuteLine(const json& ev, int64_t now_ns) {
  std::string k = ev.value("k", "");
  if (k == "stdout" || k == "stderr")
    return json{{"type", k}, {"text", ev.value("text", "")}, {"timestamp", now_ns}};
  if (k == "result")
    return ResultLine(ev.value("main", false), ev.contains("data") ? ev["data"] : json::object());
  if (k == "error")
    return json{{"type", "error"},
                {"name", ev.value("name", "")},
                {"value", ev.value("value", "")},
                {"traceback", ev.value("traceback", "")}};
  return nullptr;
}

void ServeInterpreterPort(ApiContext& ctx, Exchange& ex, const SandboxTarget& t) {
  using interpreter_port::Contexts;
  using interpreter_port::Execute;
  if (t.path == "/execute" && ex.method() == "POST") {
    Execute(ctx, ex, t);
  } else if (t.path == "/contexts" || t.path.starts_with("/contexts/")) {
    Contexts(ctx, ex, t);
  } else if (t.path == "/health" && ex.method() == "GET") {
    ex.SendJson(200, json{{"status", "ok"}});
  } else {
    throw ApiError(Code::kRouteNotFound, ex.method() + " " + t.path.substr(0, 256) +
                                             " is not served on the interpreter port (" +
                                             std::to_string(kInterpreterPort) + ")");
  }
}

}  // namespace kiln::api::e2b
