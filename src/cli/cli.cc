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

const Verb* find_verb(const Group& group, std::string_view name) {
  for (const auto& a : kAliases) {
    if (a.alias == name) name = a.verb;
  }
  for (const auto& v : group.verbs()) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

Invocation parse_group(const Group& group, const std::vector<std::string>& args, std::size_t i,
                       Invocation inv) {
  const std::string prefix = "kiln " + std::string(group.name) + " ";
  while (i < args.size() && args[i] == "--json") ++i;
  if (i == args.size() || is_help(args[i])) {
    inv.help = group_help(group);
    inv.help_is_error = i == args.size();
    return inv;
  }
  const std::string& name = args[i];
  const Verb* verb = find_verb(group, name);
  if (verb == nullptr) {
    throw UsageError("unknown " + std::string(group.name) + " verb '" + name + "'" +
                         did_you_mean(name, names_of(group.verbs())),
                     "see `kiln " + std::string(group.name) + " --help`");
  }
  const std::string hint = "see `" + prefix + std::string(verb->name) + " --help`";
  std::vector<std::string> rest(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());

  // --help wins even next to a bad flag: it is what a confused user types.
  for (const auto& tok : rest) {
    if (tok == "--") break;
    if (tok == "--help" || tok == "-h") {
      inv.help = verb_help(group, *verb);
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
  const std::string id_noun(group.id_noun);
  if (parsed.positionals.size() < wanted) throw UsageError("missing the " + id_noun, hint);
  if (parsed.positionals.size() > wanted) {
    std::string msg = "unexpected argument '" + parsed.positionals[wanted] + "'";
    if (verb->takes_command) msg += "; the command goes after --";
    throw UsageError(msg, hint);
  }
  for (const auto& p : parsed.positionals) {
    if (p.empty()) throw UsageError("the " + id_noun + " is empty", hint);
  }
  if (verb->takes_command && parsed.command.empty()) {
    throw UsageError("missing the command to run (put it after --)", hint);
  }
  if (!verb->takes_command && parsed.has_separator) {
    throw UsageError(prefix + std::string(verb->name) + " does not run a command", hint);
  }
  inv.action = Action::kVerb;
  inv.group = &group;
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

const std::vector<Verb>& key_verbs() {
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
       .flags = {value("name"), value("daily-limit-micros"), toggle("admin")},
       .positionals = 0,
       .takes_command = false,
       .handler = cmd_keys_create},
      {.name = "ls",
       .synopsis = "ls",
       .brief = "list API keys, revoked ones too",
       .summary = "List API keys, oldest first, revoked ones included. Secrets are never shown.",
       .details = "",
       .flags = {},
       .positionals = 0,
       .takes_command = false,
       .handler = cmd_keys_ls},
      {.name = "revoke",
       .synopsis = "revoke ID",
       .brief = "revoke an API key",
       .summary = "Revoke an API key: the daemon refuses it from its next request on.\n"
                  "Revoking twice is fine.",
       .details = "",
       .flags = {},
       .positionals = 1,
       .takes_command = false,
       .handler = cmd_keys_revoke},
  };
  return verbs;
}

const Group& sandbox_group() {
  static const Group group = {
      .name = "sandbox",
      .id_noun = "sandbox ID",
      .notes = "\nrun and exec exit with the command's status (see their --help).\n",
      .verbs = sandbox_verbs};
  return group;
}

const Group& keys_group() {
  static const Group group = {
      .name = "keys",
      .id_noun = "key ID",
      .notes = "\nOnly admin keys may manage keys; `kiln --help` shows which key kiln sends.\n",
      .verbs = key_verbs};
  return group;
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
         "  keys VERB ...     create, list and revoke API keys (`kiln keys --help`)\n"
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
         "  RUNTIME_API_KEY   the key to send when KILN_API_KEY is unset\n"
         "  KILN_ADMIN_KEY_FILE\n"
         "                    else the key in this file, when readable (default\n"
         "                    " +
         std::string(kDefaultAdminKeyFile) +
         ": the local admin key kilnd creates)\n"
         "\n"
         "Example:\n"
         "  kiln server &\n"
         "  kiln sandbox run -- python3 -c 'print(6 * 7)'\n";
}

std::string group_help(const Group& group) {
  const std::string name(group.name);
  std::string out = "Usage: kiln " + name + " VERB [OPTIONS] [ARGS]\n\nVerbs:\n";
  for (const auto& v : group.verbs()) {
    std::string line = "  " + std::string(v.synopsis);
    // A synopsis too long for the column gets its brief on the next line.
    if (line.size() >= 40) line += "\n";
    line.append(line.size() < 40 ? 40 - line.size() : 40, ' ');
    out += line + std::string(v.brief) + "\n";
  }
  out +=
      "\nEvery verb takes --json and --help; `kiln " + name + " VERB --help` lists its options.\n";
  out += std::string(group.notes);
  return out;
}

std::string sandbox_help() { return group_help(sandbox_group()); }

std::string verb_help(const Group& group, const Verb& verb) {
  std::string out = "Usage: kiln " + std::string(group.name) + " " + std::string(verb.synopsis) +
                    "\n\n" + std::string(verb.summary) + "\n\nOptions:\n" +
                    std::string(verb.details) + std::string(kCommonOptions);
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
  if (word == "sandbox") return parse_group(sandbox_group(), args, i + 1, std::move(inv));
  if (word == "keys") return parse_group(keys_group(), args, i + 1, std::move(inv));
  if (word.starts_with("-")) {
    std::string_view bare = std::string_view(word).substr(word.find_first_not_of('-'));
    throw UsageError("unknown flag " + word + did_you_mean(bare, {"json", "help", "version"}, "--"),
                     "see `kiln --help`");
  }
  throw UsageError(
      "unknown command '" + word + "'" + did_you_mean(word, {"server", "sandbox", "keys"}),
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
