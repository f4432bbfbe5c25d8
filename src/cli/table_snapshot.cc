// The command table's `kiln snapshot` verbs (see command_table.h).
#include <string>

#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/flag_builders.h"

namespace kiln::cli {

const std::vector<Verb>& SnapshotVerbs() {
  static const std::vector<Verb> verbs = {
      {.name = "ls",
       .args = "",
       .brief = "list snapshots",
       .summary = "List snapshots.",
       .flags = {ValueFlag("sandbox", "ID", "only snapshots of this sandbox"),
                 ValueFlag("name", "N", "only snapshots with this name")},
       .positionals = 0,
       .takes_command = false,
       .handler = CmdSnapshotLs},
      {.name = "get",
       .args = "ID",
       .brief = "show one snapshot",
       .summary = "Show one snapshot.",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSnapshotGet},
      {.name = "rm",
       .args = "ID",
       .brief = "delete a snapshot",
       .summary = "Delete a snapshot; sandboxes started from it keep running.",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSnapshotRm},
      {.name = "export",
       .args = "ID",
       .brief = "write a snapshot to a tar file",
       .summary = "Write a snapshot (its checkpoint and checksums) to FILE as a tar, for\n"
                  "`kiln snapshot import` on another kilnd with the same runsc and base image.\n"
                  "FILE appears only once the whole tar arrived.",
       .flags = {WithShortName('o',
                               RequiredFlag("output", "FILE", "where to write the tar (required)",
                                            std::string(kFileValue)))},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSnapshotExport},
      {.name = "import",
       .args = "FILE",
       .brief = "import a snapshot tar, print its id",
       .summary = "Import a tar written by `kiln snapshot export` as this key's snapshot,\n"
                  "keeping its id, name, labels and network rules. kilnd checks every\n"
                  "checksum first; importing the same snapshot again is harmless.",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSnapshotImport},
  };
  return verbs;
}

}  // namespace kiln::cli
