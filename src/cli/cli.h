// Command-line front: finds the verb, checks its flags, shows help, and
// turns failures into messages and exit codes. The command table itself
// (Commands(), every verb and flag) lives in command_table.cc; help texts
// and shell completion are both generated from it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli/args.h"
#include "cli/context.h"

namespace kiln::cli {

struct Verb {
  std::string_view name;
  std::string_view synopsis;  // after "kiln GROUP " (after "kiln " for a top-level verb)
  std::string_view brief;     // one line for `kiln GROUP --help`
  std::string_view summary;
  std::string_view details;     // options and notes for --help
  std::vector<FlagSpec> flags;  // --json, --quiet and --help are added for every verb
  int positionals;              // this many (the sandbox or key ID), up to max_positionals
  bool takes_command;           // "-- CMD..." required
  int (*handler)(Context&, const ParsedArgs&);
  std::string_view arg_noun = "";     // what usage errors call the positional, if not the group's
  std::string_view arg_choices = "";  // the positional's values, for completion ("bash")
  int max_positionals = -1;           // -1: exactly `positionals`
  bool command_optional = false;      // with takes_command: "-- CMD..." may be left out
};

// A command made of verbs: `kiln sandbox VERB`, `kiln keys VERB`.
struct Group {
  std::string_view name;     // "sandbox"
  std::string_view id_noun;  // "sandbox ID": what usage errors call the positional
  std::string_view notes;    // the last lines of `kiln GROUP --help`
  const std::vector<Verb>& (*verbs)();
};

// One word after `kiln`: a group of verbs, a verb of its own (`kiln usage`),
// or, with neither, `kiln server` (its arguments go to kilnd untouched).
struct Command {
  std::string_view name;
  std::string_view synopsis;  // "sandbox VERB ...", for `kiln --help`
  std::string_view brief;     // may span lines (continuations are indented)
  const Group* group = nullptr;
  const Verb* verb = nullptr;
};

const std::vector<Command>& Commands();
const std::vector<Verb>& SandboxVerbs();
const std::vector<Verb>& SnapshotVerbs();
const std::vector<Verb>& KeyVerbs();
const std::vector<Verb>& ImageVerbs();
const Group& ImageGroup();
const Group& SandboxGroup();
const Group& SnapshotGroup();
const Group& KeysGroup();
const Verb& UsageVerb();
const Verb& CompletionVerb();

// Flags every verb takes on top of its own.
const std::vector<FlagSpec>& CommonFlags();

// Other spellings of verbs ("list" → "ls"), accepted in every group.
struct Alias {
  std::string_view alias, verb;
};
const std::vector<Alias>& VerbAliases();

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

std::string TopHelp();
std::string GroupHelp(const Group& group);
std::string SandboxHelp();
std::string VerbHelp(const Group* group, const Verb& verb);  // group null: top-level verb

// The whole program (main() minus argv conversion); returns the exit status.
int RunCli(const std::vector<std::string>& args);

}  // namespace kiln::cli
