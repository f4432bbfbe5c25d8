// Command-line front: finds the verb, checks its flags, shows help, and
// turns failures into messages and exit codes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli/args.h"
#include "cli/context.h"

namespace kiln::cli {

struct Verb {
  std::string_view name;
  std::string_view synopsis;  // after "kiln sandbox "
  std::string_view brief;     // one line for `kiln sandbox --help`
  std::string_view summary;
  std::string_view details;     // options and notes for --help
  std::vector<FlagSpec> flags;  // --json and --help are added for every verb
  int positionals;              // exactly this many (the sandbox or key ID)
  bool takes_command;           // "-- CMD..." required
  int (*handler)(Context&, const ParsedArgs&);
};

// A command made of verbs: `kiln sandbox VERB`, `kiln keys VERB`.
struct Group {
  std::string_view name;     // "sandbox"
  std::string_view id_noun;  // "sandbox ID": what usage errors call the positional
  std::string_view notes;    // the last lines of `kiln GROUP --help`
  const std::vector<Verb>& (*verbs)();
};

const std::vector<Verb>& sandbox_verbs();
const std::vector<Verb>& key_verbs();
const Group& sandbox_group();
const Group& keys_group();

enum class Action { kHelp, kVersion, kServer, kVerb };

struct Invocation {
  Action action = Action::kHelp;
  std::string help;              // kHelp
  bool help_is_error = false;    // usage shown because something was missing → stderr, exit 1
  const Group* group = nullptr;  // kVerb
  const Verb* verb = nullptr;    // kVerb
  ParsedArgs args;               // kVerb
  bool json = false;
  std::vector<std::string> server_args;  // kServer
};

// Everything short of talking to the daemon; throws UsageError.
Invocation parse_command_line(const std::vector<std::string>& args);

// True when --json appears before any "--" (known even if parsing fails).
bool wants_json(const std::vector<std::string>& args);

std::string top_help();
std::string group_help(const Group& group);
std::string sandbox_help();
std::string verb_help(const Group& group, const Verb& verb);

// The whole program (main() minus argv conversion); returns the exit status.
int run_cli(const std::vector<std::string>& args);

}  // namespace kiln::cli
