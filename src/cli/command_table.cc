// The top of the command table (command_table.h): the commands after
// `kiln`, the groups, the verbs of their own (usage, completion) and the
// flags every verb or `kiln` itself takes. Each group's verbs are in
// table_<group>.cc.
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/flag_builders.h"

namespace kiln::cli {

const std::vector<FlagSpec>& CommonFlags() {
  static const std::vector<FlagSpec> flags = {
      ToggleFlag("json", "print the daemon's JSON answer; errors as JSON on stderr"),
      ToggleFlag("quiet", "no progress line on stderr"), ToggleFlag("help", "show this help")};
  return flags;
}

const std::vector<FlagSpec>& TopFlags() {
  static const std::vector<FlagSpec> flags = {
      ToggleFlag("json", "print the daemon's JSON answers; errors as JSON on stderr"),
      ToggleFlag("quiet", "no progress line on stderr (there is none off a terminal)"),
      ToggleFlag("help", "show help; works after any verb too"),
      ToggleFlag("version", "print kiln's version")};
  return flags;
}

const std::vector<Alias>& VerbAliases() {
  static const std::vector<Alias> aliases = {{"list", "ls"}, {"delete", "rm"}};
  return aliases;
}

const Verb& UsageVerb() {
  static const Verb verb = {
      .name = "usage",
      .args = "",
      .brief = "show metered usage and cost",
      .summary =
          "Show metered usage over a period: sandboxes, CPU seconds, memory GiB-hours,\n"
          "disk GB-months and cost in micros (millionths of the price unit), per group\n"
          "and in total. A non-admin key sees its own usage only.",
      .flags = {ValueFlag("from", "T",
                          "start: RFC 3339 (2026-11-29T10:00:00Z) or an age such as\n"
                          "7d, 12h, 30m (default 30 days ago)"),
                ValueFlag("to", "T", "end, in the same forms (default now)"),
                ChoiceFlag("group-by", "key|label:NAME", "key label:",
                           "key (per API key) or label:NAME (per value of label NAME)")},
      .positionals = 0,
      .takes_command = false,
      .handler = CmdUsage};
  return verb;
}

const Verb& CompletionVerb() {
  static const Verb verb = {
      .name = "completion",
      .args = "bash",
      .brief = "print a bash completion script",
      .summary =
          "Print the bash completion script for kiln (commands, verbs, flags and\n"
          "their values). Load it with `source <(kiln completion bash)` or install it\n"
          "as /usr/share/bash-completion/completions/kiln.",
      .flags = {},
      .positionals = 1,
      .takes_command = false,
      .handler = CmdCompletion,
      .arg_noun = "shell (bash)",
      .arg_choices = "bash"};
  return verb;
}

const Group& SandboxGroup() {
  static const Group group = {
      .name = "sandbox",
      .id_noun = "sandbox ID",
      .notes = "\nrun and exec exit with the command's status (see their --help).\n",
      .verbs = SandboxVerbs};
  return group;
}

const Group& SnapshotGroup() {
  static const Group group = {
      .name = "snapshot",
      .id_noun = "snapshot ID",
      .notes =
          "\n`kiln sandbox snapshot ID` takes a snapshot; `kiln sandbox create --snapshot ID`\n"
          "starts a copy of one.\n",
      .verbs = SnapshotVerbs};
  return group;
}

const Group& ImageGroup() {
  static const Group group = {
      .name = "image",
      .id_noun = "image REF",
      .notes =
          "\nREF is an image id, a name (its latest version), name:tag or name@version.\n"
          "`kiln sandbox create --image REF` starts a sandbox from one.\n",
      .verbs = ImageVerbs};
  return group;
}

const Group& KeysGroup() {
  static const Group group = {
      .name = "keys",
      .id_noun = "key ID",
      .notes = "\nOnly admin keys may manage keys; `kiln --help` shows which key kiln sends.\n",
      .verbs = KeyVerbs};
  return group;
}

const std::vector<Command>& Commands() {
  static const std::vector<Command> table = {
      {.name = "server",
       .synopsis = "server [ARGS...]",
       .brief = "run the daemon (the kilnd next to kiln) in the foreground;\n"
                "ARGS go to kilnd (`kiln server --help` shows its own help)"},
      {.name = "sandbox",
       .synopsis = "sandbox VERB ...",
       .brief = "create sandboxes, run commands in them, snapshot, fork,\n"
                "set egress rules, list, stop, delete (`kiln sandbox --help`)",
       .group = &SandboxGroup()},
      {.name = "snapshot",
       .synopsis = "snapshot VERB ...",
       .brief = "list, show and delete snapshots (`kiln snapshot --help`)",
       .group = &SnapshotGroup()},
      {.name = "image",
       .synopsis = "image VERB ...",
       .brief = "build, list, tag and delete images (`kiln image --help`)",
       .group = &ImageGroup()},
      {.name = "keys",
       .synopsis = "keys VERB ...",
       .brief = "create, list and revoke API keys (`kiln keys --help`)",
       .group = &KeysGroup()},
      {.name = "usage",
       .synopsis = "usage [OPTIONS]",
       .brief = "metered usage and cost (`kiln usage --help`)",
       .verb = &UsageVerb()},
      {.name = "completion",
       .synopsis = "completion bash",
       .brief = "print the bash completion script",
       .verb = &CompletionVerb()},
  };
  return table;
}

}  // namespace kiln::cli
