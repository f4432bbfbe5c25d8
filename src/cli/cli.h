// Command-line front: finds the verb, checks its flags, shows help, and
// turns failures into messages and exit codes. The command table itself
// (Commands(), every verb and flag) is in command_table.h; help texts
// (help.h) and shell completion (completion.h) are both generated from it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/context.h"
#include "cli/help.h"

namespace kiln::cli {

enum class Action { kHelp, kVersion, kServer, kVerb };

struct Invocation {
  Action action = Action::kHelp;
  std::string help;              // kHelp
  bool help_is_error = false;    // usage shown because something was missing → stderr, exit 1
  const Group* group = nullptr;  // kVerb; null for a top-level verb
  const Verb* verb = nullptr;    // kVerb
  ParsedArgs args;               // kVerb
  bool json = false;
  bool quiet = false;
  std::vector<std::string> server_args;  // kServer
};

// Everything short of talking to the daemon; throws UsageError.
Invocation ParseCommandLine(const std::vector<std::string>& args);

// True when --json appears before any "--" (known even if parsing fails).
bool WantsJson(const std::vector<std::string>& args);

// The whole program (main() minus argv conversion); returns the exit status.
int RunCli(const std::vector<std::string>& args);

}  // namespace kiln::cli
