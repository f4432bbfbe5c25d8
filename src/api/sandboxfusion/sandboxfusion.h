// SandboxFusion's API (bytedance/SandboxFusion) as a front of kilnd, so that
// verl's code rewards (reward_model.sandbox_fusion.url) and the
// `sandbox-fusion` client grade programs in kiln sandboxes:
//   http://HOST:7070/sandboxfusion/{key}/run_code   POST, one program
//   http://HOST:7070/sandboxfusion/{key}/v1/ping    GET, "pong"
// verl sends no credentials, so the kiln key travels in the path; it is read
// by the front's dialect (never logged: the request log and the metrics name
// the route's pattern, "/sandboxfusion/{key}/run_code").
//
// Each program gets a fresh sandbox of the key's language image (a warm copy
// of it, from the image's pool), launched through launch::Launcher; files,
// the compile and the run go through io::SandboxIo; the sandbox is deleted
// once the answer is sent. docs/api.md ("SandboxFusion's API") lists what is
// served and refused.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/context.h"
#include "api/front.h"
#include "api/router.h"
#include "common/status.h"
#include "interpreter/protocol.h"
#include "io/types.h"

namespace kiln::api {

struct SandboxFusionOptions {
  // The image every program runs in, resolved under the caller's key
  // (`make sandboxfusion-image` builds it under KILN_API_KEY).
  std::string image = "sandboxfusion";
  // Warm copies of that image kept restored ahead (its warm copy's pool),
  // set on the first request that launches it; 0 leaves the pool alone.
  int pool_size = 2;
  // Programs run at once by this front (all keys); more wait their turn
  // (control/fair_slots.h). SandboxFusion's timeouts are wall-clock: 64
  // compiles at once on 2 cores pushed correct programs past compile_timeout
  // and run_timeout, so a program waits for a slot rather than for a core.
  // 0: two per host CPU.
  int concurrency = 0;
  // Of those, the most one key holds (0: three quarters, at least 1), and
  // how many of one key's requests may wait.
  int key_concurrency = 0;
  int queue = 256;
};

// Registers /sandboxfusion/{key}/... (run_code, run_jupyter, v1/ping and a
// refusal of anything else under the prefix).
void AddSandboxFusionRoutes(Router& r, ApiContext& ctx, SandboxFusionOptions options);
// The key is the path segment after /sandboxfusion/; errors in SandboxFusion's
// shape.
ApiFront::Dialect SandboxFusionDialect();

namespace sandboxfusion {

inline constexpr const char* kPrefix = "/sandboxfusion";
// Where the program's files live and its commands run.
inline constexpr const char* kWorkDir = "/workspace";
// Bounds of compile_timeout and run_timeout, seconds.
inline constexpr double kMaxTimeoutSeconds = 600;
// Output kept per stream; a program printing more is stopped there.
inline constexpr uint64_t kOutputCap = 8ull << 20;
// Bytes of fetch_files answered in all.
inline constexpr uint64_t kFetchCap = 16ull << 20;
// Files and their bytes a request may write (decoded).
inline constexpr size_t kMaxFiles = 256;
inline constexpr uint64_t kMaxFileBytes = 12ull << 20;

// How a language's runtime is held to memory_limit_MB.
enum class MemoryRule {
  kAddressSpace,  // RLIMIT_AS on the run (SandboxFusion's own way)
  kJvm,           // -Xmx: the JVM reserves far more address space than it uses
  kNode,          // --max-old-space-size
  kGo,            // GOMEMLIMIT: Go reserves arenas up front
  kNone,          // only the sandbox's own memory
};

struct Language {
  std::string name;  // SandboxFusion's word: "python", "cpp", "go_test", ...
  // Served: the program's file name, the compile step (none if empty) and
  // the run step, as bash command lines in kWorkDir. {class} is replaced by
  // the program's class or object name (java, scala).
  std::string file;
  std::string compile;
  std::string run;
  // The tool the steps need; its absence answers SandboxError.
  std::string tool;
  MemoryRule memory = MemoryRule::kAddressSpace;
  bool core = false;  // in the core image (make sandboxfusion-image)
  // Not served: why (every SandboxFusion language has an entry).
  std::string refused;
};

// The entry of `name`; nullptr if SandboxFusion names no such language.
const Language* FindLanguage(std::string_view name);
// Every language SandboxFusion names, in its order.
const std::vector<Language>& Languages();

// POST /run_code, read. Timeouts in seconds as SandboxFusion takes them
// (floats); memory_limit_MB <= 0 is none.
struct RunCodeRequest {
  std::string code;
  const Language* language = nullptr;
  double compile_timeout = 10;
  double run_timeout = 10;
  int64_t memory_limit_mb = -1;
  std::optional<std::string> stdin_data;
  std::vector<std::pair<std::string, std::string>> files;  // path, decoded bytes
  std::vector<std::string> fetch_files;
};
// Issues name the field ("body.run_timeout"); an unknown language is not an
// issue here (its answer is a SandboxError naming it, as SandboxFusion's).
struct ReadResult {
  RunCodeRequest request;
  std::string unknown_language;  // set when `language` names none
};
ReadResult ReadRunCode(const nlohmann::json& body);

// POST /run_jupyter: cells run in order in one Python kernel (kiln's own,
// src/interpreter). cell_timeout 0 is none; total_timeout bounds them all.
struct RunJupyterRequest {
  std::vector<std::string> cells;
  double cell_timeout = 0;
  double total_timeout = 45;
  int64_t memory_limit_mb = -1;  // the kernel's address space (RLIMIT_AS, RLIMIT_DATA)
  std::vector<std::pair<std::string, std::string>> files;
  std::vector<std::string> fetch_files;
};
RunJupyterRequest ReadRunJupyter(const nlohmann::json& body);
// A cell's answer, {stdout, stderr, display: [mime bundles], error:
// [{ename, evalue, traceback: [lines]}]}, from the kernel's execution.
nlohmann::json CellJson(const interpreter::Execution& run);
// Python that lowers the running kernel's soft RLIMIT_AS and RLIMIT_DATA to
// `mb` MiB (never above the hard limit) and leaves no name behind.
std::string KernelMemoryLimitCell(int64_t mb);

// The steps of one program, with the request's values filled in.
struct Plan {
  std::string file;                    // the program's path under kWorkDir
  std::string source;                  // what the file holds
  std::optional<io::Command> compile;  // none: an interpreted language
  io::Command run;
};
Plan PlanFor(const RunCodeRequest& request);
// The class or object a Java or Scala program declares public (else "Main").
std::string MainClassOf(const std::string& code, const std::string& language);

// A step's outcome in SandboxFusion's words.
enum class StepStatus { kFinished, kError, kTimeLimitExceeded };
struct StepResult {
  StepStatus status = StepStatus::kFinished;
  double execution_time = 0;
  std::optional<int> return_code;
  std::string stdout_data, stderr_data;
};
// From kiln's exec result: a timeout is TimeLimitExceeded, a signal is
// Finished with -signum (as Python's subprocess reports it), a command that
// did not start is Error.
StepResult StepFromExec(const io::ExecResult& run);
// The stderr marker a step prints when the image lacks its language's
// tool (so the answer is a SandboxError, not the program's failure).
inline constexpr const char* kMissingToolMarker = "kiln-sandboxfusion: missing tool: ";
bool MissingTool(const StepResult& step, std::string* tool);

enum class RunStatus { kSuccess, kFailed, kSandboxError };
std::string_view RunStatusName(RunStatus status);

struct RunCodeAnswer {
  RunStatus status = RunStatus::kSuccess;
  std::string message;
  std::optional<StepResult> compile_result, run_result;
  std::map<std::string, std::string> files;  // path -> base64
};
// SandboxFusion's parse_run_status: Error in a step is SandboxError, a
// timeout or a non-zero code is Failed, else Success.
RunStatus StatusOf(const std::optional<StepResult>& compile, const std::optional<StepResult>& run);
nlohmann::json AnswerJson(const RunCodeAnswer& answer);
// run_jupyter's answer: {status, message, driver, cells, executor_pod_name,
// files}; `driver` is the whole run as one step.
nlohmann::json JupyterJson(RunStatus status, const std::string& message,
                           const std::optional<StepResult>& driver, const nlohmann::json& cells,
                           const std::map<std::string, std::string>& files);
// A SandboxError answer with nothing run.
nlohmann::json SandboxErrorJson(const std::string& message);

// The HTTP status of a refusal: kiln's, except what clears on its own (no
// room, a rate limit, a request still running), which is 504: verl retries
// that alone.
int HttpStatus(Code code);
// Answers `s` as a SandboxError in SandboxFusion's shape; nothing if an
// answer began.
void SendError(Exchange& ex, const Status& s);

// The key in /sandboxfusion/{key}/...; nullopt without one.
std::optional<std::string> KeyFromPath(std::string_view path);

}  // namespace sandboxfusion
}  // namespace kiln::api
