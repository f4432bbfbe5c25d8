// The command table: every command, verb and flag kiln knows. Parsing, help
// texts and the shell completion script are all generated from it.
#include <cstdint>
#include <string>

#include "cli/cli.h"
#include "cli/commands.h"
#include "common/contract.h"

namespace kiln::cli {
namespace {

// "(default N)" for a default of the API contract, so help shows kilnd's.
std::string DefaultOf(const contract::IntField& field) {
  return "(default " + std::to_string(field.def) + ")";
}

// --vcpu, --memory and --disk of run and create.
std::string ShapeDetails() {
  return "  --vcpu N          virtual CPUs " + DefaultOf(contract::kVcpu) + "\n" +
         "  --memory MiB      memory " + DefaultOf(contract::kMemoryMiB) + "\n" +
         "  --disk MiB        size of the writable /workspace and /tmp " +
         DefaultOf(contract::kDiskMiB) + "\n";
}

FlagSpec Value(std::string name, bool repeatable = false) {
  return {std::move(name), true, repeatable};
}
FlagSpec Required(std::string name) { return {std::move(name), true, false, true}; }
FlagSpec Choice(std::string name, std::string choices) {
  return {std::move(name), true, false, false, std::move(choices)};
}
FlagSpec Toggle(std::string name) { return {std::move(name), false, false}; }
FlagSpec FollowFlag() {
  FlagSpec spec{"follow", false, false};
  spec.short_name = 'f';
  return spec;
}

// The lifecycle and money flags of a new sandbox (run, create) after `flags`.
std::vector<FlagSpec> WithLifecycle(std::vector<FlagSpec> flags) {
  for (const char* toggle : {"trial", "paid", "no-internet"}) flags.push_back(Toggle(toggle));
  flags.push_back(Value("max-cost"));
  return flags;
}

// The egress flags a new sandbox takes (create, fork) after `flags`.
std::vector<FlagSpec> WithNetwork(std::vector<FlagSpec> flags) {
  flags.push_back(Choice("internet", "on off"));
  flags.push_back(Value("allow", true));
  flags.push_back(Value("deny", true));
  return flags;
}

}  // namespace

// A macro so it can be pasted into the literals below.
#define KILN_WAIT_DETAILS                                                         \
  "  --wait S          wait up to S seconds for capacity when the host is full\n" \
  "                    (0-120, default 120); then it fails with no_capacity\n"

// --allow and --deny of create and fork (`sandbox network` takes them too).
// --trial, --paid, --no-internet and --max-cost of run and create.
#define KILN_LIFECYCLE_DETAILS                                                       \
  "  --trial, --paid   both accepted and the same: a local daemon has no trial\n"    \
  "  --no-internet     no egress at all (kiln's default; same as --internet off)\n"  \
  "  --max-cost MICROS refuse to start if the first lease, every vCPU busy, would\n" \
  "                    cost more (409 budget_exceeded)\n"

#define KILN_RULE_DETAILS                                                          \
  "  --allow H         reach only these hosts (repeatable, or comma-separated):\n" \
  "                    example.com, *.example.com, an IP or a CIDR;\n"             \
  "                    --allow implies --internet on\n"                            \
  "  --deny H          never reach these hosts (repeatable, or comma-separated)\n"

const std::vector<FlagSpec>& CommonFlags() {
  static const std::vector<FlagSpec> flags = {Toggle("json"), Toggle("quiet"), Toggle("help")};
  return flags;
}

const std::vector<Alias>& VerbAliases() {
  static const std::vector<Alias> aliases = {{"list", "ls"}, {"delete", "rm"}};
  return aliases;
}

const std::vector<Verb>& SandboxVerbs() {
  // Static like the table: a Verb only views its texts.
  static const std::string run_details =
      ShapeDetails() +
      "  --timeout S       time limit for CMD in seconds (default 60; exit 124)\n" +
      "  --timeout-ms N    the same in milliseconds " + DefaultOf(contract::kExecTimeoutMs) + "\n" +
      "  --env K=V         environment variable for the sandbox (repeatable)\n"
      "  --cwd DIR         working directory of CMD (default /workspace)\n"
      "  --image REF       start from this image (id, name, name:tag, "
      "name@version)\n" KILN_WAIT_DETAILS KILN_LIFECYCLE_DETAILS;
  static const std::string create_details =
      ShapeDetails() + "  --timeout S       lease in seconds " +
      DefaultOf(contract::kTimeoutSeconds) + "; it stops after that\n" +
      "  --name NAME       a name ([A-Za-z0-9._-], up to 64)\n"
      "  --label K=V       label (repeatable)\n"
      "  --env K=V         environment variable for every command (repeatable)\n"
      "  --snapshot ID     start a copy of this snapshot (its shape wins)\n"
      "  --image REF       start from this image (id, name, name:tag, "
      "name@version)\n" KILN_WAIT_DETAILS
      "  --internet on|off reach the internet (default off)\n" KILN_RULE_DETAILS
          KILN_LIFECYCLE_DETAILS
      "  --get-or-create   with --name: answer the live sandbox of that name (woken if\n"
      "                    paused) instead of making another\n"
      "  --idle-pause S    pause after S idle seconds (0 = never, else 10-86400)\n"
      "  --auto-wake on|off  wake a paused sandbox for a command or file call\n"
      "                    (default on; off: 409 sandbox_paused)\n"
      "  --on-lease-end pause|stop  what the lease's end does\n"
      "  --persistent      keep it across lease ends\n"
      "  --no-sudo         the sandbox user may not use sudo\n"
      "  --max-total-cost MICROS  stop it once it has cost this much\n";
  static const std::string exec_details =
      "  --cwd DIR         working directory (default /workspace)\n"
      "  --env K=V         environment variable (repeatable)\n"
      "  --timeout S       time limit in seconds (default 60)\n"
      "  --timeout-ms N    the same in milliseconds " +
      DefaultOf(contract::kExecTimeoutMs) + "\n" +
      "  --stdin-file F    feed file F (or - for kiln's stdin, up to 12 MiB) to CMD\n";
  static const std::vector<Verb> verbs = {
      {.name = "run",
       .synopsis = "run [OPTIONS] -- CMD...",
       .brief = "run CMD in a fresh sandbox, then stop it",
       .summary = "Create a sandbox, run CMD in it (argv, no shell) with its output streamed,\n"
                  "then stop the sandbox, also on failure or Ctrl-C.",
       .details = run_details,
       .flags = WithLifecycle({Value("vcpu"), Value("memory"), Value("disk"), Value("timeout"),
                               Value("timeout-ms"), Value("env", true), Value("cwd"), Value("wait"),
                               Value("image")}),
       .positionals = 0,
       .takes_command = true,
       .handler = CmdSandboxRun},
      {.name = "create",
       .synopsis = "create [OPTIONS]",
       .brief = "create a sandbox, print its id",
       .summary = "Create a sandbox and print its id.",
       .details = create_details,
       .flags = WithLifecycle(
           WithNetwork({Value("vcpu"), Value("memory"), Value("disk"), Value("timeout"),
                        Value("name"), Value("label", true), Value("env", true), Value("snapshot"),
                        Value("wait"), Value("image"), Toggle("get-or-create"), Value("idle-pause"),
                        Choice("auto-wake", "on off"), Choice("on-lease-end", "pause stop"),
                        Toggle("persistent"), Toggle("no-sudo"), Value("max-total-cost")})),
       .positionals = 0,
       .takes_command = false,
       .handler = CmdSandboxCreate},
      {.name = "ls",
       .synopsis = "ls [--all] [--state S] [--label K=V]",
       .brief = "list sandboxes",
       .summary = "List sandboxes, oldest first.",
       .details = "  --all             include stopped sandboxes\n"
                  "  --state S         only this state: starting, running, stopping, stopped\n"
                  "  --label K=V       only sandboxes with this label (repeatable)\n",
       .flags = {Toggle("all"), Choice("state", "starting running stopping stopped"),
                 Value("label", true)},
       .positionals = 0,
       .takes_command = false,
       .handler = CmdSandboxLs},
      {.name = "get",
       .synopsis = "get ID",
       .brief = "show one sandbox",
       .summary = "Show one sandbox.",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxGet},
      {.name = "exec",
       .synopsis = "exec ID [OPTIONS] -- CMD...",
       .brief = "run CMD in a running sandbox",
       .summary = "Run CMD (argv, no shell) in a running sandbox with its output streamed.",
       .details = exec_details,
       .flags = {Value("cwd"), Value("env", true), Value("timeout"), Value("timeout-ms"),
                 Choice("stdin-file", std::string(kFileValue))},
       .positionals = 1,
       .takes_command = true,
       .handler = CmdSandboxExec},
      {.name = "shell",
       .synopsis = "shell ID [--cwd DIR] [-- CMD...]",
       .brief = "open an interactive terminal in a running sandbox",
       .summary = "Open a terminal in a running sandbox: the login shell, or CMD (a command\n"
                  "line for the shell), on a pseudo-terminal sized like this one. Keys go\n"
                  "through as typed (the local terminal is in raw mode until it ends) and\n"
                  "window resizes follow. When stdin is not a terminal its bytes are piped\n"
                  "in as they are, its end sent as ^D. Exits with the remote exit status.",
       .details = "  --cwd DIR         working directory (default the image's WORKDIR)\n",
       .flags = {Value("cwd")},
       .positionals = 1,
       .takes_command = true,
       .handler = CmdSandboxShell,
       .command_optional = true},
      {.name = "extend",
       .synopsis = "extend ID --seconds N",
       .brief = "lengthen a running sandbox's lease",
       .summary = "Extend a running sandbox's lease: it now ends N seconds after the later of\n"
                  "its old end and now, but at most one hour from now. Prints the id and the\n"
                  "new end.",
       .details = "  --seconds N       how much longer, 1-3600 (required)\n",
       .flags = {Required("seconds")},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxExtend},
      {.name = "snapshot",
       .synopsis = "snapshot ID [--disk] [--name N] [--retention-days N] [--label K=V]",
       .brief = "snapshot a running sandbox, print the snapshot id",
       .summary = "Capture a running sandbox's files, memory and processes as a snapshot and\n"
                  "print its id. The sandbox pauses only while it is captured, then goes on.\n"
                  "`kiln sandbox create --snapshot ID` starts a copy of it. With --disk, only\n"
                  "its files are kept, and a copy boots fresh from them.",
       .details = "  --disk            files only (mode disk): nothing is paused; copies boot "
                  "fresh,\n"
                  "                    at the snapshot's size or the one `create` names\n"
                  "  --name N          a name for the snapshot (up to 128 bytes)\n"
                  "  --label K=V       label (repeatable)\n"
                  "  --retention-days N\n"
                  "                    keep it N days (1-365, default 7); then the daemon deletes "
                  "it\n",
       .flags = {Toggle("disk"), Value("name"), Value("label", true), Value("retention-days")},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxSnapshot},
      {.name = "fork",
       .synopsis = "fork ID [OPTIONS]",
       .brief = "start copies of a running sandbox, print their ids",
       .summary = "Start copies of a running sandbox (same files, processes and memory) and\n"
                  "list them. The daemon snapshots the sandbox, starts the copies from the\n"
                  "snapshot, then deletes the snapshot unless --keep-snapshot.",
       .details =
           "  --count N         how many copies, 1-10 (default 1)\n"
           "  --label K=V       label of the copies (repeatable)\n"
           "  --keep-snapshot   keep the snapshot (see `kiln snapshot ls`)\n" KILN_WAIT_DETAILS
           "  --internet on|off the copies' internet access (needed unless --allow is\n"
           "                    given). With any of --internet, --allow and --deny, the\n"
           "                    copies get that policy instead of the source's\n" KILN_RULE_DETAILS,
       .flags = WithNetwork(
           {Value("count"), Value("label", true), Toggle("keep-snapshot"), Value("wait")}),
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxFork},
      {.name = "network",
       .synopsis = "network ID [--internet on|off] [--allow H]... [--deny H]... | --log",
       .brief = "show or set a sandbox's egress rules, or show its egress log",
       .summary = "Show a sandbox's network policy: whether it may reach the internet (through\n"
                  "kiln's egress proxy) and which hosts it may (allow) or may not (deny) reach.\n"
                  "With --internet, --allow or --deny, set a new policy and show it; it replaces\n"
                  "every rule, so give the whole set. With --log, list the connections the\n"
                  "sandbox made or was refused, oldest first.",
       .details = "  --internet on|off reach the internet at all; needed to set rules unless\n"
                  "                    --allow is given\n" KILN_RULE_DETAILS
                  "  --log             print the egress log instead (every page of it)\n"
                  "  --limit N         with --log: entries per request, 1-500 (default 100)\n",
       .flags = {Choice("internet", "on off"), Value("allow", true), Value("deny", true),
                 Toggle("log"), Value("limit")},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxNetwork},
      {.name = "pause",
       .synopsis = "pause ID",
       .brief = "pause a running sandbox",
       .summary = "Pause a running sandbox: its processes, memory and files are kept and it\n"
                  "uses no CPU until `kiln sandbox wake` (or a command, with auto-wake).",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxPause},
      {.name = "wake",
       .synopsis = "wake ID [--timeout S]",
       .brief = "wake a paused sandbox",
       .summary = "Wake a paused sandbox (same id, processes where they were). An awake\n"
                  "sandbox is left as it is, unless --timeout asks for a new lease.",
       .details = "  --timeout S       a new lease of S seconds\n",
       .flags = {Value("timeout")},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxWake},
      {.name = "spawn",
       .synopsis = "spawn ID [OPTIONS] -- CMD...",
       .brief = "start CMD in the background, print its process id",
       .summary = "Start CMD (argv, no shell) as a background process and print its id; see\n"
                  "`kiln sandbox ps`, `logs` and `kill`.",
       .details = "  --cwd DIR         working directory (default /workspace)\n"
                  "  --env K=V         environment variable (repeatable)\n"
                  "  --timeout-ms N    kill it after N ms (default: never)\n",
       .flags = {Value("cwd"), Value("env", true), Value("timeout-ms")},
       .positionals = 1,
       .takes_command = true,
       .handler = CmdSandboxSpawn},
      {.name = "ps",
       .synopsis = "ps ID",
       .brief = "list a sandbox's background processes",
       .summary = "List a sandbox's background processes, running and recent.",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxPs},
      {.name = "logs",
       .synopsis = "logs ID PID [-f]",
       .brief = "print a background process's output",
       .summary = "Print what a background process wrote (the latest 1 MiB is kept), stdout\n"
                  "to stdout and stderr to stderr. With -f, keep printing until it ends.",
       .details = "  -f, --follow      follow the output until the process ends\n",
       .flags = {FollowFlag()},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxLogs,
       .arg_noun = "ID PID"},
      {.name = "kill",
       .synopsis = "kill ID PID [--signal S]",
       .brief = "signal a background process",
       .summary = "Send a signal to a background process (and what it started).",
       .details = "  --signal S        TERM (default), KILL, INT, HUP, QUIT, USR1 or USR2\n",
       .flags = {Choice("signal", "TERM KILL INT HUP QUIT USR1 USR2")},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxKill,
       .arg_noun = "ID PID"},
      {.name = "cp",
       .synopsis = "cp SRC DST",
       .brief = "copy files or folders to or from a sandbox",
       .summary = "Copy a file or a folder between this machine and a sandbox; the sandbox side\n"
                  "is written ID:/path. A folder's contents land in DST (created); a file\n"
                  "copied onto a folder goes inside it. Modes are kept; folders travel as tar.",
       .details = "",
       .flags = {},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxCp,
       .arg_noun = "SRC DST"},
      {.name = "cat",
       .synopsis = "cat ID PATH",
       .brief = "print a file of a sandbox",
       .summary = "Write a sandbox file's bytes to stdout.",
       .details = "",
       .flags = {},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxCat,
       .arg_noun = "ID PATH"},
      {.name = "watch",
       .synopsis = "watch ID PATH [--recursive]",
       .brief = "print changes to a sandbox's files as they happen",
       .summary = "Watch a folder (or a file) of a sandbox and print one line per change,\n"
                  "`TYPE PATH` (create, write, remove, rename with `<- OLD`, chmod; a folder\n"
                  "ends in /), until Ctrl-C, which stops the watch.",
       .details = "  --recursive       its subfolders too, and those made later\n",
       .flags = {Toggle("recursive")},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxWatch,
       .arg_noun = "ID PATH"},
      {.name = "port-forward",
       .synopsis = "port-forward ID [LOCAL:]REMOTE [--address A]",
       .brief = "forward a local port to a port inside a sandbox",
       .summary = "Listen on A:LOCAL and carry every connection to REMOTE inside the sandbox\n"
                  "over its tunnel WebSocket, until Ctrl-C. LOCAL defaults to REMOTE; 0 picks\n"
                  "a free port. Prints `Forwarding from A:LOCAL -> REMOTE` once listening.",
       .details = "  --address A       the local address to listen on (default 127.0.0.1)\n",
       .flags = {Value("address")},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxPortForward,
       .arg_noun = "ID [LOCAL:]REMOTE"},
      {.name = "preview",
       .synopsis = "preview ID PORT [--public] [--ttl SECONDS]",
       .brief = "share a sandbox port at its own address, print its url",
       .summary = "Share PORT of a sandbox at http://PORT-ID.DOMAIN:LISTENER/ (kilnd's\n"
                  "--preview-domain) and print url and urlWithToken. A private preview needs\n"
                  "its token (the x-kiln-preview-token header, or open urlWithToken once).\n"
                  "Sharing it again changes its visibility and token lifetime.",
       .details = "  --public          no token needed (kilnd needs --allow-public-previews)\n"
                  "  --ttl SECONDS     the token's lifetime, 60-604800 (default 86400)\n",
       .flags = {Toggle("public"), Value("ttl")},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxPreview,
       .arg_noun = "ID PORT"},
      {.name = "previews",
       .synopsis = "previews ID",
       .brief = "list a sandbox's shared ports",
       .summary = "List a sandbox's previews (shared ports) with their urls.",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxPreviews},
      {.name = "preview-rotate",
       .synopsis = "preview-rotate ID PORT",
       .brief = "refuse a preview's tokens so far, print a new one",
       .summary = "Give a preview a new secret: every token issued so far is refused and open\n"
                  "connections to the port are cut. Prints the preview with a new token.",
       .details = "",
       .flags = {},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxPreviewRotate,
       .arg_noun = "ID PORT"},
      {.name = "unshare",
       .synopsis = "unshare ID PORT",
       .brief = "stop sharing a sandbox port",
       .summary = "Delete a port's preview; its open connections are cut first.",
       .details = "",
       .flags = {},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxUnshare,
       .arg_noun = "ID PORT"},
      {.name = "run-code",
       .synopsis = "run-code ID FILE|- [--lang L] [--context C] [--timeout-ms N]",
       .brief = "run code in a sandbox's interpreter, keeping its state",
       .summary = "Run FILE (or stdin) as one cell in a stateful interpreter context of the\n"
                  "sandbox (variables stay for the next run). stdout and stderr stream as they\n"
                  "come; results print their text/plain. Exits 1 on an error, 124 on a timeout.",
       .details = "  --lang L          python (default) or javascript\n"
                  "  --context C       the context (default the language's own)\n"
                  "  --timeout-ms N    interrupt it after N ms (default 60000; 0 = never)\n",
       .flags = {Choice("lang", "python javascript"), Value("context"), Value("timeout-ms")},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdSandboxRunCode,
       .arg_noun = "ID FILE"},
      {.name = "stop",
       .synopsis = "stop ID",
       .brief = "stop a sandbox",
       .summary = "Stop a sandbox; nothing of it remains on the host afterwards.",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxStop},
      {.name = "rm",
       .synopsis = "rm ID",
       .brief = "delete a sandbox",
       .summary = "Delete a sandbox (stopping it first); deleting twice is fine.",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSandboxRm},
  };
  return verbs;
}

namespace {
FlagSpec OutputFlag() {
  FlagSpec spec{"output", true, false};
  spec.short_name = 'o';
  spec.required = true;
  spec.choices = std::string(kFileValue);
  return spec;
}
}  // namespace

const std::vector<Verb>& SnapshotVerbs() {
  static const std::vector<Verb> verbs = {
      {.name = "ls",
       .synopsis = "ls [--sandbox ID] [--name N]",
       .brief = "list snapshots",
       .summary = "List snapshots.",
       .details = "  --sandbox ID      only snapshots of this sandbox\n"
                  "  --name N          only snapshots with this name\n",
       .flags = {Value("sandbox"), Value("name")},
       .positionals = 0,
       .takes_command = false,
       .handler = CmdSnapshotLs},
      {.name = "get",
       .synopsis = "get ID",
       .brief = "show one snapshot",
       .summary = "Show one snapshot.",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSnapshotGet},
      {.name = "rm",
       .synopsis = "rm ID",
       .brief = "delete a snapshot",
       .summary = "Delete a snapshot; sandboxes started from it keep running.",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSnapshotRm},
      {.name = "export",
       .synopsis = "export ID -o FILE",
       .brief = "write a snapshot to a tar file",
       .summary = "Write a snapshot (its checkpoint and checksums) to FILE as a tar, for\n"
                  "`kiln snapshot import` on another kilnd with the same runsc and base image.\n"
                  "FILE appears only once the whole tar arrived.",
       .details = "  -o, --output FILE  where to write the tar (required)\n",
       .flags = {OutputFlag()},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSnapshotExport},
      {.name = "import",
       .synopsis = "import FILE",
       .brief = "import a snapshot tar, print its id",
       .summary = "Import a tar written by `kiln snapshot export` as this key's snapshot,\n"
                  "keeping its id, name, labels and network rules. kilnd checks every\n"
                  "checksum first; importing the same snapshot again is harmless.",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdSnapshotImport},
  };
  return verbs;
}

namespace {
FlagSpec Short(std::string name, char letter, bool repeatable) {
  FlagSpec spec{std::move(name), true, repeatable};
  spec.short_name = letter;
  return spec;
}
}  // namespace

const std::vector<Verb>& ImageVerbs() {
  static const std::vector<Verb> verbs = {
      {.name = "build",
       .synopsis = "build [DIR] -t NAME[:TAG]... [OPTIONS]",
       .brief = "build an image, print its id and name:version",
       .summary = "Build an image from DIR's Dockerfile (DIR is packed and sent as the build\n"
                  "context, minus what its .dockerignore names), from -f FILE, or from a recipe\n"
                  "(--from, --pip, --apt, --npm). The build log streams as it comes; a failed\n"
                  "build exits 1 with its error.",
       .details = "  -t, --tag NAME[:TAG]  the image's name, and a tag (repeatable)\n"
                  "  -f, --file F      the Dockerfile (default DIR/Dockerfile)\n"
                  "  --target T        the Dockerfile stage to build\n"
                  "  --build-arg K=V   a Dockerfile ARG (repeatable)\n"
                  "  --no-cache        rebuild every step\n"
                  "  --from IMG        recipe: the base image\n"
                  "  --pip P, --apt P, --npm P\n"
                  "                    recipe: packages to install (repeatable)\n"
                  "  --start CMD       a command every sandbox from the image starts with\n"
                  "  --ready-port N    ... ready once it listens on port N\n"
                  "  --ready-command C ... ready once C exits 0\n"
                  "  --allow-host H    a host RUN steps may reach (repeatable; default none)\n"
                  "  --vcpu N, --memory MiB, --disk-mib MiB, --max-image-mib MiB, --timeout S\n"
                  "                    the builder's shape, image size cap and time limit\n",
       .flags = {Short("tag", 't', true), Short("file", 'f', false), Value("target"),
                 Value("build-arg", true), Toggle("no-cache"), Value("from"), Value("pip", true),
                 Value("apt", true), Value("npm", true), Value("start"), Value("ready-port"),
                 Value("ready-command"), Value("allow-host", true), Value("vcpu"), Value("memory"),
                 Value("disk-mib"), Value("max-image-mib"), Value("timeout")},
       .positionals = 0,
       .takes_command = false,
       .handler = CmdImageBuild,
       .arg_noun = "DIR",
       .max_positionals = 1},
      {.name = "ls",
       .synopsis = "ls [--name N]",
       .brief = "list images, newest first",
       .summary = "List images, newest first.",
       .details = "  --name N          only versions of this name\n",
       .flags = {Value("name")},
       .positionals = 0,
       .takes_command = false,
       .handler = CmdImageLs},
      {.name = "get",
       .synopsis = "get REF",
       .brief = "show one image",
       .summary = "Show one image: REF is an id, a name (its latest), name:tag or name@version.",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdImageGet},
      {.name = "versions",
       .synopsis = "versions NAME",
       .brief = "list every version of a name",
       .summary = "List every version of an image name, newest first.",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdImageVersions,
       .arg_noun = "image NAME"},
      {.name = "rm",
       .synopsis = "rm REF",
       .brief = "delete an image",
       .summary = "Delete an image version; sandboxes started from it keep running.",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdImageRm},
      {.name = "tag",
       .synopsis = "tag REF TAG",
       .brief = "tag an image (the tag moves from any other version)",
       .summary = "Give an image version a tag; the tag leaves any other version of the name.",
       .details = "",
       .flags = {},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdImageTag,
       .arg_noun = "image REF and TAG"},
      {.name = "untag",
       .synopsis = "untag REF TAG",
       .brief = "remove a tag",
       .summary = "Remove a tag from an image version.",
       .details = "",
       .flags = {},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdImageUntag,
       .arg_noun = "image REF and TAG"},
      {.name = "logs",
       .synopsis = "logs REF [-f]",
       .brief = "print an image's build log",
       .summary = "Print an image's build log; with -f, follow it until the build ends.",
       .details = "  -f, --follow      wait for new lines until the build ends\n",
       .flags = {[] {
         FlagSpec f{"follow", false, false};
         f.short_name = 'f';
         return f;
       }()},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdImageLogs},
      {.name = "prune",
       .synopsis = "prune",
       .brief = "drop unused layers and build cache",
       .summary = "Drop layers no image uses and the build cache; prints what was freed.",
       .details = "",
       .flags = {},
       .positionals = 0,
       .takes_command = false,
       .handler = CmdImagePrune},
      {.name = "pool",
       .synopsis = "pool REF SIZE",
       .brief = "keep SIZE warm sandboxes of an image ready",
       .summary = "Keep SIZE sandboxes of the image started and waiting, so creates from it\n"
                  "are hand-outs (0 turns the pool off).",
       .details = "",
       .flags = {},
       .positionals = 2,
       .takes_command = false,
       .handler = CmdImagePool,
       .arg_noun = "image REF and SIZE"},
      {.name = "registry",
       .synopsis = "registry set REGISTRY --username U --password-stdin | ls | rm REGISTRY",
       .brief = "manage private registry credentials",
       .summary = "Store (set), list (ls) or delete (rm) the credentials builds use to pull\n"
                  "from a private registry. The password is read from stdin, never argv.",
       .details = "  --username U      the registry user (set)\n"
                  "  --password-stdin  read the password from stdin (set)\n",
       .flags = {Value("username"), Toggle("password-stdin")},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdImageRegistry,
       .arg_noun = "action (set, ls, rm)",
       .arg_choices = "set ls rm",
       .max_positionals = 2},
  };
  return verbs;
}

const std::vector<Verb>& KeyVerbs() {
  static const std::vector<Verb> verbs = {
      {.name = "create",
       .synopsis = "create [--name N] [--daily-limit-micros N] [--admin]",
       .brief = "create an API key, print its secret",
       .summary = "Create an API key and print its id and secret. The secret is shown only\n"
                  "this once (the daemon keeps just its hash): store it now.",
       .details = "  --name N          a name for the key (up to 128 bytes)\n"
                  "  --daily-limit-micros N\n"
                  "                    the key's daily spending limit in micros (default: none)\n"
                  "  --admin           the key may manage keys too\n",
       .flags = {Value("name"), Value("daily-limit-micros"), Toggle("admin")},
       .positionals = 0,
       .takes_command = false,
       .handler = CmdKeysCreate},
      {.name = "ls",
       .synopsis = "ls",
       .brief = "list API keys, revoked ones too",
       .summary = "List API keys, oldest first, revoked ones included. Secrets are never shown.",
       .details = "",
       .flags = {},
       .positionals = 0,
       .takes_command = false,
       .handler = CmdKeysLs},
      {.name = "revoke",
       .synopsis = "revoke ID",
       .brief = "revoke an API key",
       .summary = "Revoke an API key: the daemon refuses it from its next request on.\n"
                  "Revoking twice is fine.",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = CmdKeysRevoke},
  };
  return verbs;
}

const Verb& UsageVerb() {
  static const Verb verb = {
      .name = "usage",
      .synopsis = "usage [--from T] [--to T] [--group-by key|label:NAME]",
      .brief = "show metered usage and cost",
      .summary =
          "Show metered usage over a period: sandboxes, CPU seconds, memory GiB-hours,\n"
          "disk GB-months and cost in micros (millionths of the price unit), per group\n"
          "and in total. A non-admin key sees its own usage only.",
      .details =
          "  --from T          start: RFC 3339 (2026-11-29T10:00:00Z) or an age such as\n"
          "                    7d, 12h, 30m (default 30 days ago)\n"
          "  --to T            end, in the same forms (default now)\n"
          "  --group-by G      key (per API key) or label:NAME (per value of label NAME)\n",
      .flags = {Value("from"), Value("to"), Choice("group-by", "key label:")},
      .positionals = 0,
      .takes_command = false,
      .handler = CmdUsage};
  return verb;
}

const Verb& CompletionVerb() {
  static const Verb verb = {
      .name = "completion",
      .synopsis = "completion bash",
      .brief = "print a bash completion script",
      .summary =
          "Print the bash completion script for kiln (commands, verbs, flags and\n"
          "their values). Load it with `source <(kiln completion bash)` or install it\n"
          "as /usr/share/bash-completion/completions/kiln.",
      .details = "",
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

#undef KILN_RULE_DETAILS
#undef KILN_WAIT_DETAILS

}  // namespace kiln::cli
