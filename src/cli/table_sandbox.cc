// The command table's `kiln sandbox` verbs (see command_table.h).
#include <string>

#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/flag_builders.h"
#include "common/contract.h"

namespace kiln::cli {
namespace {

// "(default N)" for a default of the API contract, so help shows kilnd's.
std::string ContractDefault(const contract::IntField& field) {
  return "(default " + std::to_string(field.def) + ")";
}

// --vcpu, --memory and --disk of run and create.
std::vector<FlagSpec> SandboxShapeFlags() {
  return {
      ValueFlag("vcpu", "N", "virtual CPUs " + ContractDefault(contract::kVcpu)),
      ValueFlag("memory", "MiB", "memory " + ContractDefault(contract::kMemoryMiB)),
      ValueFlag("disk", "MiB",
                "size of the writable /workspace and /tmp " + ContractDefault(contract::kDiskMiB))};
}

// --wait of run, create and fork.
FlagSpec SandboxWaitFlag() {
  return ValueFlag("wait", "S",
                   "wait up to S seconds for capacity when the host is full\n"
                   "(0-120, default 120); then it fails with no_capacity");
}

FlagSpec SandboxImageFlag() {
  return ValueFlag("image", "REF", "start from this image (id, name, name:tag, name@version)");
}

// The lifecycle and money flags of a new sandbox (run, create).
std::vector<FlagSpec> SandboxLifecycleFlags() {
  return {ToggleFlag("trial", ""),  // shares --paid's entry
          ToggleFlag("paid", "both accepted and the same: a local daemon has no trial"),
          ToggleFlag("no-internet", "no egress at all (kiln's default; same as --internet off)"),
          ValueFlag("max-cost", "MICROS",
                    "refuse to start if the first lease, every vCPU busy, would\n"
                    "cost more (409 budget_exceeded)")};
}

// The egress flags of create, fork and network; --internet means a little
// different in each.
std::vector<FlagSpec> SandboxNetworkFlags(std::string internet_help) {
  return {ChoiceFlag("internet", "on|off", "on off", std::move(internet_help)),
          RepeatedFlag("allow", "H",
                       "reach only these hosts (repeatable, or comma-separated):\n"
                       "example.com, *.example.com, an IP or a CIDR;\n"
                       "--allow implies --internet on"),
          RepeatedFlag("deny", "H", "never reach these hosts (repeatable, or comma-separated)")};
}

}  // namespace

const std::vector<Verb>& SandboxVerbs() {
  // Static like the table: a Verb only views its texts.
  static const std::vector<Verb> verbs = {
      {.name = "run",
       .args = "",
       .brief = "run CMD in a fresh sandbox, then stop it",
       .summary = "Create a sandbox, run CMD in it (argv, no shell) with its output streamed,\n"
                  "then stop the sandbox, also on failure or Ctrl-C.",
       .flags = ConcatFlags(
           {SandboxShapeFlags(),
            {ValueFlag("timeout", "S", "time limit for CMD in seconds (default 60; exit 124)"),
             ValueFlag("timeout-ms", "N",
                       "the same in milliseconds " + ContractDefault(contract::kExecTimeoutMs)),
             RepeatedFlag("env", "K=V", "environment variable for the sandbox (repeatable)"),
             ValueFlag("cwd", "DIR", "working directory of CMD (default /workspace)"),
             SandboxWaitFlag(), SandboxImageFlag()},
            SandboxLifecycleFlags()}),
       .positionals = 0,
       .takes_command = true,
       .handler = CmdSandboxRun},
      {.name = "create",
       .args = "",
       .brief = "create a sandbox, print its id",
       .summary = "Create a sandbox and print its id.",
       .flags = ConcatFlags(
           {SandboxShapeFlags(),
            {ValueFlag("timeout", "S",
                       "lease in seconds " + ContractDefault(contract::kTimeoutSeconds) +
                           "; it stops after that"),
             ValueFlag("name", "NAME", "a name ([A-Za-z0-9._-], up to 64)"),
             RepeatedFlag("label", "K=V", "label (repeatable)"),
             RepeatedFlag("env", "K=V", "environment variable for every command (repeatable)"),
             ValueFlag("snapshot", "ID", "start a copy of this snapshot (its shape wins)"),
             SandboxWaitFlag(), SandboxImageFlag(),
             ToggleFlag("get-or-create",
                        "with --name: answer the live sandbox of that name (woken if\n"
                        "paused) instead of making another"),
             ValueFlag("idle-pause", "S", "pause after S idle seconds (0 = never, else 10-86400)"),
             ChoiceFlag("auto-wake", "on|off", "on off",
                        "wake a paused sandbox for a command or file call\n"
                        "(default on; off: 409 sandbox_paused)"),
             ChoiceFlag("on-lease-end", "pause|stop", "pause stop", "what the lease's end does"),
             ToggleFlag("persistent", "keep it across lease ends"),
             ToggleFlag("pause-files-only", "its pauses keep only the files (a wake boots afresh)"),
             ToggleFlag("no-sudo", "the sandbox user may not use sudo"),
             ValueFlag("max-total-cost", "MICROS", "stop it once it has cost this much")},
            SandboxNetworkFlags("reach the internet (default off)"),
            SandboxLifecycleFlags()}),
       .positionals = 0,
       .takes_command = false,
       .handler = CmdSandboxCreate},
      {.name = "ls",
       .args = "",
       .brief = "list sandboxes",
       .summary = "List sandboxes, oldest first.",
       .flags = {ToggleFlag("all", "include stopped sandboxes"),
                 ChoiceFlag("state", "S", "starting running stopping stopped",
                            "only this state: starting, running, stopping, stopped"),
                 RepeatedFlag("label", "K=V", "only sandboxes with this label (repeatable)")},
       .positionals = 0,
       .takes_command = false,
       .handler = CmdSandboxLs},
      {.name = "get",
       .args = "ID",
       .brief = "show one sandbox",
       .summary = "Show one sandbox.",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxGet},
      {.name = "exec",
       .args = "ID",
       .brief = "run CMD in a running sandbox",
       .summary = "Run CMD (argv, no shell) in a running sandbox with its output streamed.",
       .flags = {ValueFlag("cwd", "DIR", "working directory (default /workspace)"),
                 RepeatedFlag("env", "K=V", "environment variable (repeatable)"),
                 ValueFlag("timeout", "S", "time limit in seconds (default 60)"),
                 ValueFlag("timeout-ms", "N",
                           "the same in milliseconds " + ContractDefault(contract::kExecTimeoutMs)),
                 ChoiceFlag("stdin-file", "F", std::string(kFileValue),
                            "feed file F (or - for kiln's stdin, up to 12 MiB) to CMD")},
       .positionals = 1,
       .takes_command = true,
       .handler = CmdSandboxExec},
      {.name = "shell",
       .args = "ID",
       .brief = "open an interactive terminal in a running sandbox",
       .summary = "Open a terminal in a running sandbox: the login shell, or CMD (a command\n"
                  "line for the shell), on a pseudo-terminal sized like this one. Keys go\n"
                  "through as typed (the local terminal is in raw mode until it ends) and\n"
                  "window resizes follow. When stdin is not a terminal its bytes are piped\n"
                  "in as they are, its end sent as ^D. Exits with the remote exit status.",
       .flags = {ValueFlag("cwd", "DIR", "working directory (default the image's WORKDIR)")},
       .positionals = 1,
       .takes_command = true,
       .handler = CmdSandboxShell,
       .command_optional = true},
      {.name = "extend",
       .args = "ID",
       .brief = "lengthen a running sandbox's lease",
       .summary = "Extend a running sandbox's lease: it now ends N seconds after the later of\n"
                  "its old end and now, but at most kilnd's --max-lease-seconds (a day by\n"
                  "default) from now. Prints the id and the new end.",
       .flags = {RequiredFlag("seconds", "N", "how much longer, 1-86400 (required)")},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxExtend},
      {.name = "snapshot",
       .args = "ID",
       .brief = "snapshot a running sandbox, print the snapshot id",
       .summary = "Capture a running sandbox's files, memory and processes as a snapshot and\n"
                  "print its id. The sandbox pauses only while it is captured, then goes on.\n"
                  "`kiln sandbox create --snapshot ID` starts a copy of it. With --disk, only\n"
                  "its files are kept, and a copy boots fresh from them.",
       .flags = {ToggleFlag("disk",
                            "files only (mode disk): nothing is paused; copies boot fresh,\n"
                            "at the snapshot's size or the one `create` names"),
                 ValueFlag("name", "N", "a name for the snapshot (up to 128 bytes)"),
                 RepeatedFlag("label", "K=V", "label (repeatable)"),
                 ValueFlag("retention-days", "N",
                           "keep it N days (1-365, default 7); then the daemon deletes it")},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxSnapshot},
      {.name = "fork",
       .args = "ID",
       .brief = "start copies of a running sandbox, print their ids",
       .summary = "Start copies of a running sandbox (same files, processes and memory) and\n"
                  "list them. The daemon snapshots the sandbox, starts the copies from the\n"
                  "snapshot, then deletes the snapshot unless --keep-snapshot.",
       .flags = ConcatFlags(
           {{ValueFlag("count", "N", "how many copies, 1-10 (default 1)"),
             RepeatedFlag("label", "K=V", "label of the copies (repeatable)"),
             ToggleFlag("keep-snapshot", "keep the snapshot (see `kiln snapshot ls`)"),
             SandboxWaitFlag()},
            SandboxNetworkFlags("the copies' internet access (needed unless --allow is\n"
                                "given). With any of --internet, --allow and --deny, the\n"
                                "copies get that policy instead of the source's")}),
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxFork},
      {.name = "network",
       .args = "ID",
       .brief = "show or set a sandbox's egress rules, or show its egress log",
       .summary = "Show a sandbox's network policy: whether it may reach the internet (through\n"
                  "kiln's egress proxy) and which hosts it may (allow) or may not (deny) reach.\n"
                  "With --internet, --allow or --deny, set a new policy and show it; it replaces\n"
                  "every rule, so give the whole set. With --log, list the connections the\n"
                  "sandbox made or was refused, oldest first.",
       .flags = ConcatFlags(
           {SandboxNetworkFlags("reach the internet at all; needed to set rules unless\n"
                                "--allow is given"),
            {ToggleFlag("log", "print the egress log instead (every page of it)"),
             ValueFlag("limit", "N", "with --log: entries per request, 1-500 (default 100)")}}),
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxNetwork},
      {.name = "pause",
       .args = "ID",
       .brief = "pause a running sandbox",
       .summary = "Pause a running sandbox: its processes, memory and files are kept and it\n"
                  "uses no CPU until `kiln sandbox wake` (or a command, with auto-wake).\n"
                  "--files-only keeps only its files: the wake boots afresh on them.",
       .flags = {ToggleFlag("files-only", "keep only the files, not memory and processes")},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxPause},
      {.name = "metrics",
       .args = "ID",
       .brief = "show a sandbox's CPU, memory and disk over time",
       .summary = "Show a sandbox's resource use: the meter's readings (every 5 s) as points\n"
                  "of the range (means, with CPU and memory peaks).",
       .flags = {ChoiceFlag("range", "R", "15m 1h 6h 24h 7d 30d", "how far back (default 15m)")},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxMetrics},
      {.name = "wake",
       .args = "ID",
       .brief = "wake a paused sandbox",
       .summary = "Wake a paused sandbox (same id, processes where they were). An awake\n"
                  "sandbox is left as it is, unless --timeout asks for a new lease.",
       .flags = {ValueFlag("timeout", "S", "a new lease of S seconds")},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxWake},
      {.name = "spawn",
       .args = "ID",
       .brief = "start CMD in the background, print its process id",
       .summary = "Start CMD (argv, no shell) as a background process and print its id; see\n"
                  "`kiln sandbox ps`, `logs` and `kill`.",
       .flags = {ValueFlag("cwd", "DIR", "working directory (default /workspace)"),
                 RepeatedFlag("env", "K=V", "environment variable (repeatable)"),
                 ValueFlag("timeout-ms", "N", "kill it after N ms (default: never)")},
       .positionals = 1,
       .takes_command = true,
       .handler = CmdSandboxSpawn},
      {.name = "ps",
       .args = "ID",
       .brief = "list a sandbox's background processes",
       .summary = "List a sandbox's background processes, running and recent.",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxPs},
      {.name = "logs",
       .args = "ID PID",
       .brief = "print a background process's output",
       .summary = "Print what a background process wrote (the latest 1 MiB is kept), stdout\n"
                  "to stdout and stderr to stderr. With -f, keep printing until it ends.",
       .flags = {WithShortName('f', ToggleFlag("follow",
                                               "follow the output until the process "
                                               "ends"))},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxLogs,
       .arg_noun = "ID PID"},
      {.name = "kill",
       .args = "ID PID",
       .brief = "signal a background process",
       .summary = "Send a signal to a background process (and what it started).",
       .flags = {ChoiceFlag("signal", "S", "TERM KILL INT HUP QUIT USR1 USR2",
                            "TERM (default), KILL, INT, HUP, QUIT, USR1 or USR2")},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxKill,
       .arg_noun = "ID PID"},
      {.name = "cp",
       .args = "SRC DST",
       .brief = "copy files or folders to or from a sandbox",
       .summary = "Copy a file or a folder between this machine and a sandbox; the sandbox side\n"
                  "is written ID:/path. A folder's contents land in DST (created); a file\n"
                  "copied onto a folder goes inside it. Modes are kept; folders travel as tar.",
       .flags = {},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxCp,
       .arg_noun = "SRC DST"},
      {.name = "cat",
       .args = "ID PATH",
       .brief = "print a file of a sandbox",
       .summary = "Write a sandbox file's bytes to stdout.",
       .flags = {},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxCat,
       .arg_noun = "ID PATH"},
      {.name = "watch",
       .args = "ID PATH",
       .brief = "print changes to a sandbox's files as they happen",
       .summary = "Watch a folder (or a file) of a sandbox and print one line per change,\n"
                  "`TYPE PATH` (create, write, remove, rename with `<- OLD`, chmod; a folder\n"
                  "ends in /), until Ctrl-C, which stops the watch.",
       .flags = {ToggleFlag("recursive", "its subfolders too, and those made later")},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxWatch,
       .arg_noun = "ID PATH"},
      {.name = "port-forward",
       .args = "ID [LOCAL:]REMOTE",
       .brief = "forward a local port to a port inside a sandbox",
       .summary = "Listen on A:LOCAL and carry every connection to REMOTE inside the sandbox\n"
                  "over its tunnel WebSocket, until Ctrl-C. LOCAL defaults to REMOTE; 0 picks\n"
                  "a free port. Prints `Forwarding from A:LOCAL -> REMOTE` once listening.",
       .flags = {ValueFlag("address", "A", "the local address to listen on (default 127.0.0.1)")},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxPortForward,
       .arg_noun = "ID [LOCAL:]REMOTE"},
      {.name = "preview",
       .args = "ID PORT",
       .brief = "share a sandbox port at its own address, print its url",
       .summary = "Share PORT of a sandbox at http://PORT-ID.DOMAIN:LISTENER/ (kilnd's\n"
                  "--preview-domain) and print url and urlWithToken. A private preview needs\n"
                  "its token (the x-kiln-preview-token header, or open urlWithToken once).\n"
                  "Sharing it again changes its visibility and token lifetime.",
       .flags = {ToggleFlag("public", "no token needed (kilnd needs --allow-public-previews)"),
                 ValueFlag("ttl", "SECONDS", "the token's lifetime, 60-604800 (default 86400)")},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxPreview,
       .arg_noun = "ID PORT"},
      {.name = "previews",
       .args = "ID",
       .brief = "list a sandbox's shared ports",
       .summary = "List a sandbox's previews (shared ports) with their urls.",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxPreviews},
      {.name = "preview-rotate",
       .args = "ID PORT",
       .brief = "refuse a preview's tokens so far, print a new one",
       .summary = "Give a preview a new secret: every token issued so far is refused and open\n"
                  "connections to the port are cut. Prints the preview with a new token.",
       .flags = {},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxPreviewRotate,
       .arg_noun = "ID PORT"},
      {.name = "unshare",
       .args = "ID PORT",
       .brief = "stop sharing a sandbox port",
       .summary = "Delete a port's preview; its open connections are cut first.",
       .flags = {},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxUnshare,
       .arg_noun = "ID PORT"},
      {.name = "run-code",
       .args = "ID FILE|-",
       .brief = "run code in a sandbox's interpreter, keeping its state",
       .summary = "Run FILE (or stdin) as one cell in a stateful interpreter context of the\n"
                  "sandbox (variables stay for the next run). stdout and stderr stream as they\n"
                  "come; results print their text/plain. Exits 1 on an error, 124 on a timeout.",
       .flags = {ChoiceFlag("lang", "L", "python javascript", "python (default) or javascript"),
                 ValueFlag("context", "C", "the context (default the language's own)"),
                 ValueFlag("timeout-ms", "N",
                           "interrupt it after N ms (default 60000; 0 = never)")},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxRunCode,
       .arg_noun = "ID FILE"},
      {.name = "stop",
       .args = "ID",
       .brief = "stop a sandbox",
       .summary = "Stop a sandbox; nothing of it remains on the host afterwards.",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxStop},
      {.name = "rm",
       .args = "ID",
       .brief = "delete a sandbox",
       .summary = "Delete a sandbox (stopping it first); deleting twice is fine.",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxRm},
  };
  return verbs;
}

}  // namespace kiln::cli
