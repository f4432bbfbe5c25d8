// The command table's `kiln keys` verbs (see command_table.h).
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/flag_builders.h"

namespace kiln::cli {

const std::vector<Verb>& KeyVerbs() {
  static const std::vector<Verb> verbs = {
      {.name = "create",
       .args = "",
       .brief = "create an API key, print its secret",
       .summary = "Create an API key and print its id and secret. The secret is shown only\n"
                  "this once (the daemon keeps just its hash): store it now.",
       .flags = {ValueFlag("name", "N", "a name for the key (up to 128 bytes)"),
                 ValueFlag("daily-limit-micros", "N",
                           "the key's daily spending limit in micros (default: none)"),
                 ToggleFlag("admin", "the key may manage keys too")},
       .positionals = 0,
       .takes_command = false,
       .handler = CmdKeysCreate},
      {.name = "ls",
       .args = "",
       .brief = "list API keys, revoked ones too",
       .summary = "List API keys, oldest first, revoked ones included. Secrets are never shown.",
       .flags = {},
       .positionals = 0,
       .takes_command = false,
       .handler = CmdKeysLs},
      {.name = "revoke",
       .args = "ID",
       .brief = "revoke an API key",
       .summary = "Revoke an API key: the daemon refuses it from its next request on.\n"
                  "Revoking twice is fine.",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdKeysRevoke},
  };
  return verbs;
}

}  // namespace kiln::cli
