// Stateful interpreter contexts in a running sandbox (issue 28).
//
// A context is kiln's own kernel (kernel.py, kernel.js: compiled into kilnd)
// run as an ordinary background process of the sandbox: `python3 -u -c
// <source> kiln-context=<id>` or `node -e <source> kiln-context=<id>`, as
// the sandbox's user in its cwd. Nothing is written into the sandbox, and
// kilnd keeps no record of contexts: they are found in the sandbox's
// process list by that marker, so they survive a kilnd restart and travel
// with a snapshot or a fork, state and all. The newest process with a
// context's marker is the context; it is dead when that process ended,
// and gone (deleted) when it ended with code 0 (the kernel's own exit).
//
// A run writes one JSON request to the kernel's stdin and reads the
// kernel's protocol (protocol.h) from the process's output by cursor.
// Thread-safe; one run at a time per context (a second gets busy).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "interpreter/protocol.h"
#include "io/sandbox_io.h"

namespace kiln::interpreter {

struct ContextInfo {
  std::string id;
  Language language = Language::kPython;
  std::string cwd;
  std::string state;                       // running, busy or dead
  std::optional<int64_t> execution_count;  // none if the kernel's output no longer says
  int64_t created_ms = 0;
  int pid = 0;
  std::string process_id;  // the background process ("p3")
};

struct ContextSpec {
  std::optional<std::string> id;  // default: the language's name
  Language language = Language::kPython;
  std::optional<std::string> cwd;  // default /workspace
  std::map<std::string, std::string> env;
};

struct RunRequest {
  std::string code;
  std::optional<Language> language;
  std::optional<std::string> context;  // default: the language's own context
  int64_t timeout_ms = 60000;          // 0 = none
  // Environment variables for this run alone, over the context's (Java's as
  // system properties): put back when it ends.
  std::map<std::string, std::string> env;
  // The folder of the language's own context when this run starts it
  // (default: the sandbox's).
  std::optional<std::string> cwd;
};

// A streamed event ({"k": "stdout", "text"}, ...): false stops the run
// (the client left), which interrupts the kernel.
using EventSink = std::function<bool(const nlohmann::json& event)>;

// How long a kernel has to come back after SIGINT before it is killed.
inline constexpr int64_t kInterruptGraceMs = 10000;

class Interpreter {
 public:
  // The sandbox's contexts, oldest first.
  Result<std::vector<ContextInfo>> List(const io::SandboxIo& io) const;
  // context_not_found unless it is there (dead ones are).
  Result<ContextInfo> Get(const io::SandboxIo& io, const std::string& id) const;
  // Starts a context; context_exists if one by that id runs.
  Result<ContextInfo> Create(const io::SandboxIo& io, const ContextSpec& spec) const;
  // Kills the context's kernel and starts it again, empty, same language,
  // cwd and env.
  Result<ContextInfo> Restart(const io::SandboxIo& io, const std::string& id) const;
  // SIGINT to the kernel: the running code stops, state stays. Whether it
  // was running.
  Result<bool> Interrupt(const io::SandboxIo& io, const std::string& id) const;
  // Ends the kernel (asked to exit, killed after a grace).
  Result<bool> Remove(const io::SandboxIo& io, const std::string& id) const;

  // Runs code in a context (the language's own one started on first use).
  // `sandbox_id` keys the one-run-at-a-time rule. Failures before the run
  // began: context_not_found, context_dead, busy, invalid_request; once it
  // began, every end is an Execution (timeout, lost, ...).
  Result<Execution> Run(const io::SandboxIo& io, const std::string& sandbox_id,
                        const RunRequest& request, const EventSink& sink);

 private:
  std::mutex mu_;
  std::set<std::string> running_;  // sandbox_id + "/" + context id
};

// kilnd's one Interpreter: every front's runs (kiln's /v1, E2B's port
// 49999) share its one-run-at-a-time rule.
Interpreter& SharedInterpreter();

}  // namespace kiln::interpreter
