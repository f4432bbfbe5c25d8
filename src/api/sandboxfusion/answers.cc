// SandboxFusion's answers: a step's result from kiln's exec result, the
// answer's status as SandboxFusion's parse_run_status computes it, the JSON,
// and errors (a wrong key, a bad body, no room) as SandboxErrors.
#include <array>
#include <utility>

#include "api/errors.h"
#include "api/sandboxfusion/sandboxfusion.h"
#include "api/utf8.h"

namespace kiln::api::sandboxfusion {

using nlohmann::json;

namespace {

// Signal names as kiln's exec reports them, and their numbers (Linux).
constexpr std::array<std::pair<const char*, int>, 18> kSfSignals{{
    {"SIGHUP", 1},
    {"SIGINT", 2},
    {"SIGQUIT", 3},
    {"SIGILL", 4},
    {"SIGTRAP", 5},
    {"SIGABRT", 6},
    {"SIGBUS", 7},
    {"SIGFPE", 8},
    {"SIGKILL", 9},
    {"SIGUSR1", 10},
    {"SIGSEGV", 11},
    {"SIGUSR2", 12},
    {"SIGPIPE", 13},
    {"SIGALRM", 14},
    {"SIGTERM", 15},
    {"SIGXCPU", 24},
    {"SIGXFSZ", 25},
    {"SIGSYS", 31},
}};

int SignalNumber(const std::string& name) {
  for (const auto& [n, v] : kSfSignals)
    if (name == n) return v;
  return 0;
}

json StepJson(const StepResult& s) {
  const char* status = s.status == StepStatus::kFinished ? "Finished"
                       : s.status == StepStatus::kError  ? "Error"
                                                         : "TimeLimitExceeded";
  return json{{"status", status},
              {"execution_time", s.execution_time},
              {"return_code", s.return_code ? json(*s.return_code) : json()},
              {"stdout", s.stdout_data},
              {"stderr", s.stderr_data}};
}

}  // namespace

StepResult StepFromExec(const io::ExecResult& run) {
  StepResult s;
  s.execution_time = static_cast<double>(run.exit.duration_ms) / 1000.0;
  s.stdout_data = SanitizeUtf8(run.stdout_data);
  s.stderr_data = SanitizeUtf8(run.stderr_data);
  if (run.end == io::ExecResult::End::kDeadline || run.exit.timed_out) {
    s.status = StepStatus::kTimeLimitExceeded;
    return s;
  }
  if (run.exit.start_error) {
    s.status = StepStatus::kError;
    if (!s.stderr_data.empty()) s.stderr_data += "\n";
    s.stderr_data += "the command did not start: " + SanitizeUtf8(*run.exit.start_error);
    return s;
  }
  if (run.exit.exit_code) {
    s.return_code = *run.exit.exit_code;
  } else {
    // Python's subprocess (SandboxFusion's) reports a signal as -signum.
    int n = run.exit.signal ? SignalNumber(*run.exit.signal) : 0;
    s.return_code = n > 0 ? -n : -1;
  }
  return s;
}

bool MissingTool(const StepResult& step, std::string* tool) {
  if (step.status != StepStatus::kFinished || step.return_code != 127) return false;
  std::string_view err = step.stderr_data;
  std::string_view marker = kMissingToolMarker;
  if (!err.starts_with(marker)) return false;
  std::string_view rest = err.substr(marker.size());
  *tool = std::string(rest.substr(0, rest.find('\n')));
  return true;
}

std::string_view RunStatusName(RunStatus status) {
  switch (status) {
    case RunStatus::kSuccess:
      return "Success";
    case RunStatus::kFailed:
      return "Failed";
    case RunStatus::kSandboxError:
      return "SandboxError";
  }
  return "SandboxError";
}

RunStatus StatusOf(const std::optional<StepResult>& compile, const std::optional<StepResult>& run) {
  bool failed = false;
  for (const auto* step : {&compile, &run}) {
    if (!*step) continue;
    if ((*step)->status == StepStatus::kError) return RunStatus::kSandboxError;
    if ((*step)->status == StepStatus::kTimeLimitExceeded) failed = true;
    if ((*step)->return_code && *(*step)->return_code != 0) failed = true;
  }
  return failed ? RunStatus::kFailed : RunStatus::kSuccess;
}

json AnswerJson(const RunCodeAnswer& a) {
  json files = json::object();
  for (const auto& [path, b64] : a.files) files[path] = b64;
  return json{{"status", RunStatusName(a.status)},
              {"message", a.message},
              {"compile_result", a.compile_result ? StepJson(*a.compile_result) : json()},
              {"run_result", a.run_result ? StepJson(*a.run_result) : json()},
              {"executor_pod_name", json()},
              {"files", files}};
}

std::string KernelMemoryLimitCell(int64_t mb) {
  return "def _kiln_limit(n):\n"
         "    import resource\n"
         "    for k in (resource.RLIMIT_AS, resource.RLIMIT_DATA):\n"
         "        hard = resource.getrlimit(k)[1]\n"
         "        resource.setrlimit(k, (n if hard == resource.RLIM_INFINITY else min(n, hard), "
         "hard))\n"
         "_kiln_limit(" +
         std::to_string(mb) +
         " * 1024 * 1024)\n"
         "del _kiln_limit\n";
}

json CellJson(const interpreter::Execution& run) {
  json display = json::array();
  for (const auto& r : run.results)
    if (r.contains("data")) display.push_back(r["data"]);
  json errors = json::array();
  if (run.error.is_object()) {
    // Jupyter's error content: the traceback as a list of lines.
    json lines = json::array();
    std::string tb = run.error.value("traceback", "");
    for (size_t start = 0; start < tb.size();) {
      size_t end = tb.find('\n', start);
      if (end == std::string::npos) end = tb.size();
      lines.push_back(tb.substr(start, end - start));
      start = end + 1;
    }
    errors.push_back(json{{"ename", run.error.value("name", "")},
                          {"evalue", run.error.value("value", "")},
                          {"traceback", lines}});
  }
  return json{{"stdout", SanitizeUtf8(run.stdout_text)},
              {"stderr", SanitizeUtf8(run.stderr_text)},
              {"display", display},
              {"error", errors}};
}

json JupyterJson(RunStatus status, const std::string& message,
                 const std::optional<StepResult>& driver, const json& cells,
                 const std::map<std::string, std::string>& files) {
  json f = json::object();
  for (const auto& [path, b64] : files) f[path] = b64;
  return json{{"status", RunStatusName(status)},
              {"message", message},
              {"driver", driver ? StepJson(*driver) : json()},
              {"cells", cells},
              {"executor_pod_name", json()},
              {"files", f}};
}

json SandboxErrorJson(const std::string& message) {
  RunCodeAnswer a;
  a.status = RunStatus::kSandboxError;
  a.message = message;
  return AnswerJson(a);
}

int HttpStatus(Code code) {
  switch (code) {
    // Refusals that clear on their own: verl retries a 504 (and nothing
    // else), so the program is graded later instead of scored -1.
    case Code::kNoCapacity:
    case Code::kRateLimited:
    case Code::kRequestInProgress:
      return 504;
    default:
      return api::HttpStatus(code);
  }
}

void SendError(Exchange& ex, const Status& s) {
  if (ex.responded()) return;
  int status = HttpStatus(s.code());
  int retry = s.retry_after_s() > 0 ? s.retry_after_s() : status == 504 ? 1 : 0;
  if (retry > 0) ex.extra_headers.emplace_back("Retry-After", std::to_string(retry));
  ex.SendJson(status, SandboxErrorJson(std::string(CodeName(s.code())) + ": " + s.message()));
}

std::optional<std::string> KeyFromPath(std::string_view path) {
  std::string_view prefix = kPrefix;
  if (!path.starts_with(prefix) || path.size() <= prefix.size() || path[prefix.size()] != '/')
    return std::nullopt;
  std::string_view rest = path.substr(prefix.size() + 1);
  std::string_view key = rest.substr(0, rest.find('/'));
  if (key.empty()) return std::nullopt;
  return std::string(key);
}

}  // namespace kiln::api::sandboxfusion

namespace kiln::api {

ApiFront::Dialect SandboxFusionDialect() {
  ApiFront::Dialect d;
  d.prefix = std::string(sandboxfusion::kPrefix) + "/";
  d.key = [](const Exchange& ex) { return sandboxfusion::KeyFromPath(ex.path()); };
  d.key_hint = "the kiln key in the URL: /sandboxfusion/KEY/run_code";
  d.send_error = [](Exchange& ex, const Status& s) { sandboxfusion::SendError(ex, s); };
  return d;
}

}  // namespace kiln::api
