// The pieces of `kiln sandbox shell` that need no socket or terminal: the
// request target, the frames it sends, and what the server's text frames
// mean (see docs/api.md, Terminals).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/url.h"

namespace kiln::cli {

// One shell word: 'it''s' style quoting unless it is made of safe characters.
std::string ShellQuote(std::string_view word);
// argv as one command line for the sandbox's shell ("" for none).
std::string ShellCommandLine(const std::vector<std::string>& argv);

// "<base>/v1/sandboxes/<id>/terminal?cols=..&rows=..[&command=..][&cwd=..]".
std::string TerminalTarget(const ApiUrl& url, std::string_view id, int cols, int rows,
                           const std::vector<std::string>& command,
                           const std::optional<std::string>& cwd);

// {"type":"resize","cols":C,"rows":R}
std::string ResizeFrame(int cols, int rows);

// A server text frame, as the client acts on it.
struct TerminalEvent {
  enum Kind { kReady, kExit, kError, kOther } kind = kOther;
  std::string process_id;                 // kReady
  int exit_status = 0;                    // kExit: the code, or 128+N for signal N
  std::string error_code, error_message;  // kError
};
TerminalEvent ParseTerminalEvent(std::string_view text);

}  // namespace kiln::cli
