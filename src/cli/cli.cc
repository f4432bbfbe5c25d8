#include "cli/cli.h"

#include <unistd.h>

#include <algorithm>

#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/output.h"

#ifndef KILN_VERSION
#define KILN_VERSION "dev"
#endif

namespace kiln::cli {
namespace {

constexpr std::string_view kExitNotes =
    "Exit status: the command's own; 124 if it ran out of time; 128+N if signal N\n"
    "killed it; 130 after Ctrl-C; 1 when kiln itself fails (message on stderr).\n";

constexpr std::string_view kCommonOptions =
    "  --json            print the daemon's JSON answer; errors as JSON on stderr\n"
    "  --help            show this help\n";

FlagSpec value(std::string name, bool repeatable = false) {
  return {std::move(name), true, repeatable};
}
FlagSpec toggle(std::string name) { return {std::move(name), false, false}; }

struct Alias {
  std::string_view alias, verb;
};
constexpr Alias kAliases[] = {{"list", "ls"}, {"delete", "rm"}};

std::vector<std::string> names_of(const std::vector<Verb>& verbs) {
  std::vector<std::string> names;
  for (const auto& v : verbs) names.emplace_back(v.name);
  return names;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates,
                         std::string_view prefix = "") {
  auto best = suggest(word, candidates);
  return best ? " (did you mean " + std::string(prefix) + *best + "?)" : "";
}

bool is_help(std::string_view word) { return word == "--help" || word == "-h" || word == "help"; }

const Verb* find_verb(std::string_view name) {
  for (const auto& a : kAliases) {
    if (a.alias == name) name = a.verb;
  }
  for (const auto& v : sandbox_verbs()) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

Invocation parse_sandbox(const std::vector<std::string>& args, std::size_t i, Invocation inv) {
  while (i < args.size() && args[i] == "--json") ++i;
  if (i == args.size() || is_help(args[i])) {
    inv.help = sandbox_help();
    inv.help_is_error = i == args.size();
    return inv;
  }
  const std::string& name = args[i];
  const Verb* verb = find_verb(name);
  if (verb == nullptr) {
    throw UsageError(
        "unknown sandbox verb '" + name + "'" + did_you_mean(name, names_of(sandbox_verbs())),
        "see `kiln sandbox --help`");
  }
  const std::string hint = "see `kiln sandbox " + std::string(verb->name) + " --help`";
  std::vector<std::string> rest(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());

  // --help wins even next to a bad flag: it is what a confused user types.
  for (const auto& tok : rest) {
    if (tok == "--") break;
    if (tok == "--help" || tok == "-h") {
      inv.help = verb_help(*verb);
      return inv;
    }
  }
  std::vector<FlagSpec> specs = verb->flags;
  specs.push_back(toggle("json"));
  specs.push_back(toggle("help"));
  ParsedArgs parsed;
  try {
    parsed = parse_args(rest, specs);
  } catch (const UsageError& e) {
    // "run ls -la" fails on "-la": the real mistake is the missing "--".
    const bool no_separator = std::find(rest.begin(), rest.end(), "--") == rest.end();
    throw UsageError(e.what(), verb->takes_command && no_separator
                                   ? "the command to run goes after --; " + hint
                                   : hint);
  }

  const auto wanted = static_cast<std::size_t>(verb->positionals);
  if (parsed.positionals.size() < wanted) throw UsageError("missing the sandbox ID", hint);
  if (parsed.positionals.size() > wanted) {
    std::string msg = "unexpected argument '" + parsed.positionals[wanted] + "'";
    if (verb->takes_command) msg += "; the command goes after --";
    throw UsageError(msg, hint);
  }
  for (const auto& p : parsed.positionals) {
    if (p.empty()) throw UsageError("the sandbox ID is empty", hint);
  }
  if (verb->takes_command && parsed.command.empty()) {
    throw UsageError("missing the command to run (put it after --)", hint);
  }
  if (!verb->takes_command && parsed.has_separator) {
    throw UsageError("kiln sandbox " + std::string(verb->name) + " does not run a command", hint);
  }
  inv.action = Action::kVerb;
  inv.verb = verb;
  inv.args = std::move(parsed);
  return inv;
}

}  // namespace

const std::vector<Verb>& sandbox_verbs() {
  static const std::vector<Verb> verbs = {
      {.name = "run",
       .synopsis = "run [OPTIONS] -- CMD...",
       .brief = "run CMD in a fresh sandbox, then stop it",
       .summary = "Create a sandbox, run CMD in it (argv, no shell) with its output streamed,\n"
                  "then stop the sandbox, also on failure or Ctrl-C.",
       .details = "  --vcpu N          virtual CPUs (default 2)\n"
                  "  --memory MiB      memory (default 2048)\n"
                  "  --disk MiB        size of the writable /workspace and /tmp (default 4096)\n"
                  "  --timeout-ms N    time limit for CMD (default 60000)\n"
                  "  --env K=V         environment variable for the sandbox (repeatable)\n"
                  "  --cwd DIR         working directory of CMD (default /workspace)\n",
       .flags = {value("vcpu"), value("memory"), value("disk"), value("timeout-ms"),
                 value("env", true), value("cwd")},
       .positionals = 0,
       .takes_command = true,
       .handler = cmd_sandbox_run},
      {.name = "create",
       .synopsis = "create [OPTIONS]",
       .brief = "create a sandbox, print its id",
       .summary = "Create a sandbox and print its id.",
       .details = "  --vcpu N          virtual CPUs (default 2)\n"
                  "  --memory MiB      memory (default 2048)\n"
                  "  --disk MiB        size of the writable /workspace and /tmp (default 4096)\n"
                  "  --timeout S       lease in seconds (default 1800); it stops after that\n"
                  "  --name NAME       a name ([A-Za-z0-9._-], up to 64)\n"
                  "  --label K=V       label (repeatable)\n"
                  "  --env K=V         environment variable for every command (repeatable)\n",
       .flags = {value("vcpu"), value("memory"), value("disk"), value("timeout"), value("name"),
                 value("label", true), value("env", true)},
       .positionals = 0,
       .takes_command = false,
       .handler = cmd_sandbox_create},
      {.name = "ls",
       .synopsis = "ls [--all] [--state S] [--label K=V]",
       .brief = "list sandboxes",
       .summary = "List sandboxes, oldest first.",
       .details = "  --all             include stopped sandboxes\n"
                  "  --state S         only this state: starting, running, stopping, stopped\n"
                  "  --label K=V       only sandboxes with this label (repeatable)\n",
       .flags = {toggle("all"), value("state"), value("label", true)},
       .positionals = 0,
       .takes_command = false,
       .handler = cmd_sandbox_ls},
      {.name = "get",
       .synopsis = "get ID",
       .brief = "show one sandbox",
       .summary = "Show one sandbox.",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = cmd_sandbox_get},
      {.name = "exec",
       .synopsis = "exec ID [OPTIONS] -- CMD...",
       .brief = "run CMD in a running sandbox",
       .summary = "Run CMD (argv, no shell) in a running sandbox with its output streamed.",
       .details = "  --cwd DIR         working directory (default /workspace)\n"
                  "  --env K=V         environment variable (repeatable)\n"
                  "  --timeout-ms N    time limit (default 60000)\n"
                  "  --stdin-file F    feed file F (or - for kiln's stdin, up to 12 MiB) to CMD\n",
       .flags = {value("cwd"), value("env", true), value("timeout-ms"), value("stdin-file")},
       .positionals = 1,
       .takes_command = true,
       .handler = cmd_sandbox_exec},
      {.name = "stop",
       .synopsis = "stop ID",
       .brief = "stop a sandbox",
       .summary = "Stop a sandbox; nothing of it remains on the host afterwards.",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = cmd_sandbox_stop},
      {.name = "rm",
       .synopsis = "rm ID",
       .brief = "delete a sandbox",
       .summary = "Delete a sandbox (stopping it first); deleting twice is fine.",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = cmd_sandbox_rm},
  };
  return verbs;
}

bool wants_json(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--") return false;
    if (a == "--json") return true;
  }
  return false;
}

std::string top_help() {
  return "Usage: kiln COMMAND [ARGS...]\n"
         "\n"
         "kiln is the command-line client of kilnd, the kiln sandbox daemon.\n"
         "\n"
         "Commands:\n"
         "  server [ARGS...]  run the daemon (the kilnd next to kiln) in the foreground;\n"
         "                    ARGS go to kilnd (`kiln server --help` shows its own help)\n"
         "  sandbox VERB ...  create sandboxes, run commands in them, list, stop, delete\n"
         "                    (`kiln sandbox --help`)\n"
         "\n"
         "Options:\n"
         "  --json            print the daemon's JSON answers; errors as JSON on stderr\n"
         "  --help            show help; works after any verb too\n"
         "  --version         print kiln's version\n"
         "\n"
         "Environment:\n"
         "  KILN_API_URL      daemon address (default " +
         std::string(kDefaultApiUrl) +
         ")\n"
         "  KILN_API_KEY      sent as `Authorization: Bearer KEY` when set\n"
         "\n"
         "Example:\n"
         "  kiln server &\n"
         "  kiln sandbox run -- python3 -c 'print(6 * 7)'\n";
}

std::string sandbox_help() {
  std::string out = "Usage: kiln sandbox VERB [OPTIONS] [ARGS]\n\nVerbs:\n";
  for (const auto& v : sandbox_verbs()) {
    std::string line = "  " + std::string(v.synopsis);
    line.append(line.size() < 40 ? 40 - line.size() : 1, ' ');
    out += line + std::string(v.brief) + "\n";
  }
  out += "\nEvery verb takes --json and --help; `kiln sandbox VERB --help` lists its options.\n";
  out += "\nrun and exec exit with the command's status (see their --help).\n";
  return out;
}

std::string verb_help(const Verb& verb) {
  std::string out = "Usage: kiln sandbox " + std::string(verb.synopsis) + "\n\n" +
                    std::string(verb.summary) + "\n\nOptions:\n" + std::string(verb.details) +
                    std::string(kCommonOptions);
  if (verb.takes_command) out += "\n" + std::string(kExitNotes);
  return out;
}

Invocation parse_command_line(const std::vector<std::string>& args) {
  Invocation inv;
  inv.json = wants_json(args);
  std::size_t i = 0;
  while (i < args.size() && args[i] == "--json") ++i;
  if (i == args.size()) {
    inv.help = top_help();
    inv.help_is_error = true;
    return inv;
  }
  const std::string& word = args[i];
  if (is_help(word)) {
    inv.help = top_help();
    return inv;
  }
  if (word == "--version") {
    inv.action = Action::kVersion;
    return inv;
  }
  if (word == "server") {
    inv.action = Action::kServer;
    inv.server_args.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
    return inv;
  }
  if (word == "sandbox") return parse_sandbox(args, i + 1, std::move(inv));
  if (word.starts_with("-")) {
    std::string_view bare = std::string_view(word).substr(word.find_first_not_of('-'));
    throw UsageError("unknown flag " + word + did_you_mean(bare, {"json", "help", "version"}, "--"),
                     "see `kiln --help`");
  }
  throw UsageError("unknown command '" + word + "'" + did_you_mean(word, {"server", "sandbox"}),
                   "see `kiln --help`");
}

int run_cli(const std::vector<std::string>& args) {
  const bool json = wants_json(args);
  try {
    Invocation inv = parse_command_line(args);
    switch (inv.action) {
      case Action::kHelp:
        write_all(inv.help_is_error ? STDERR_FILENO : STDOUT_FILENO, inv.help);
        return inv.help_is_error ? 1 : 0;
      case Action::kVersion:
        print_out("kiln " KILN_VERSION "\n");
        return 0;
      case Action::kServer:
        return cmd_server(inv.server_args);
      case Action::kVerb: {
        Context ctx(inv.json);
        return inv.verb->handler(ctx, inv.args);
      }
    }
  } catch (const std::exception& e) {
    report_error(e, json);
  }
  return 1;
}

}  // namespace kiln::cli
