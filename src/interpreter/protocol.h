// What kiln's interpreter kernels (kernel.py, kernel.js in this folder) say
// on their protocol channel, parsed at one boundary, and an execution put
// together from it under caps.
//
// The kernel runs inside the sandbox, where root can replace it: every line
// is untrusted. A line is parsed only under kMaxLineBytes and a depth limit,
// a field of the wrong type makes the line ignored, and what an execution
// keeps (stdout, stderr, results) is capped; what a cap cut is counted in
// `overflow`, never held in kilnd's memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::interpreter {

// Python and JavaScript run kiln's own kernels wherever the image has
// python3 or node (Python on IPython where it has ipykernel); TypeScript is
// JavaScript's kernel with the image's `typescript` package; R, Java and
// Bash need the image's Jupyter kernel for them (code-interpreter-v1 has
// IRkernel, JJava and bash_kernel).
enum class Language { kPython, kJavaScript, kTypeScript, kR, kJava, kBash };
// "python", "javascript", "typescript", "r", "java", "bash"; nullopt for
// anything else.
std::optional<Language> ParseLanguage(std::string_view name);
std::string_view LanguageName(Language language);
// For error messages.
inline constexpr std::string_view kLanguagesOffered =
    "python, javascript, typescript, r, java, bash";
// Whether node runs the language's kernel (else python3 does).
bool RunsOnNode(Language language);

// A context id: [a-z0-9][a-z0-9-]*, at most 63 characters (the reference's).
bool ValidContextId(std::string_view id);

// Caps on what kilnd keeps of one run.
inline constexpr size_t kMaxLineBytes = 16 << 20;       // one protocol line
inline constexpr size_t kMaxStreamBytes = 1 << 20;      // stdout, stderr each
inline constexpr size_t kMaxResultsBytes = 32 << 20;    // all results' data
inline constexpr size_t kMaxTracebackBytes = 64 << 10;  // an error's traceback

// One line from a kernel.
struct KernelMessage {
  enum Kind { kReady, kStart, kStdout, kStderr, kResult, kError, kDone } kind = kReady;
  std::string id;                      // kStart, kDone: the request's id
  int64_t n = 0;                       // kStart, kDone: the execution count
  std::string text;                    // kStdout, kStderr
  bool main = false;                   // kResult: the last expression's value
  nlohmann::json data;                 // kResult: an object, MIME type -> value
  std::string name, value, traceback;  // kError
  std::string status;                  // kDone: ok, error or interrupted
  uint64_t dropped = 0;                // kDone: bytes the kernel itself cut
  size_t bytes = 0;                    // the line's size
};

// The message on `line` (without its newline), or nullopt if it is not one
// (not JSON, too deep, an unknown "k", a field of the wrong type).
std::optional<KernelMessage> ParseKernelLine(std::string_view line);

// Cuts a byte stream into lines of at most max_line bytes; a longer line is
// skipped up to its newline and counted in dropped().
class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line = kMaxLineBytes) : max_line_(max_line) {}
  // Appends to *lines the lines completed by `bytes`.
  void Feed(std::string_view bytes, std::vector<std::string>* lines);
  uint64_t dropped() const { return dropped_; }

 private:
  size_t max_line_;
  std::string partial_;
  bool skipping_ = false;
  uint64_t dropped_ = 0;
};

// One run's answer, as the API's Execution.
struct Execution {
  std::string id, context_id;
  Language language = Language::kPython;
  int64_t execution_count = 0;
  std::string status = "ok";  // ok, error, interrupted, timeout, lost
  std::string stdout_text, stderr_text;
  nlohmann::json results = nlohmann::json::array();   // {main, data, refs}
  nlohmann::json error;                               // {name, value, traceback} or null
  nlohmann::json overflow = nlohmann::json::array();  // {what, droppedBytes}
  int64_t duration_ms = 0;
  bool context_started = false;
  uint64_t lost_bytes = 0;  // protocol bytes lost before kilnd read them
};

// Folds a run's messages into an Execution under the caps.
class ExecutionBuilder {
 public:
  explicit ExecutionBuilder(Execution* execution) : e_(execution) {}
  // Applies one message of the run; answers the API event to stream for it
  // ({"k": "stdout", "text"}, ...), or null when there is none.
  nlohmann::json Apply(const KernelMessage& m);
  // Records that `what` ("stdout", "results", "line", ...) lost `bytes`.
  void Overflow(std::string_view what, uint64_t bytes);

 private:
  Execution* e_;
  uint64_t results_bytes_ = 0;
};

}  // namespace kiln::interpreter
