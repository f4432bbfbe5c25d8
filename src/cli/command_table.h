// The command table: every command, verb and flag kiln knows, each flag
// described once (its FlagSpec, cli/args.h). Parsing (cli.h), help texts
// (help.h) and the shell completion script (completion.h) are all generated
// from it. The top of it (Commands(), the groups) is in command_table.cc,
// each group's verbs in table_<group>.cc.
#pragma once

#include <string_view>
#include <vector>

#include "cli/args.h"
#include "cli/context.h"

namespace kiln::cli {

struct Verb {
  std::string_view name;
  std::string_view args;   // the positionals in its usage line: "ID PID", "[DIR]"
  std::string_view brief;  // one line for `kiln GROUP --help`
  std::string_view summary;
  std::vector<FlagSpec>
      flags;           // in help order; --json, --quiet and --help are added for every verb
  int positionals;     // this many (the sandbox or key ID), up to max_positionals
  bool takes_command;  // "-- CMD..." required
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
const std::vector<Verb>& SandboxVerbs();   // table_sandbox.cc
const std::vector<Verb>& SnapshotVerbs();  // table_snapshot.cc
const std::vector<Verb>& KeyVerbs();       // table_keys.cc
const std::vector<Verb>& ImageVerbs();     // table_image.cc
const Group& ImageGroup();
const Group& SandboxGroup();
const Group& SnapshotGroup();
const Group& KeysGroup();
const Verb& UsageVerb();
const Verb& CompletionVerb();

// Flags every verb takes on top of its own.
const std::vector<FlagSpec>& CommonFlags();

// The flags of `kiln` itself, before any command: --json, --quiet, --help, --version.
const std::vector<FlagSpec>& TopFlags();

// Other spellings of verbs ("list" → "ls"), accepted in every group.
struct Alias {
  std::string_view alias, verb;
};
const std::vector<Alias>& VerbAliases();

}  // namespace kiln::cli
