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

std::vector<std::string> TopFlagNames() {
  std::vector<std::string> names;
  for (const auto& f : TopFlags()) names.push_back(f.name);
  return names;
}

std::vector<std::string> NamesOf(const std::vector<Verb>& verbs) {
  std::vector<std::string> names;
  for (const auto& v : verbs) names.emplace_back(v.name);
  return names;
}

std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates,
                       std::string_view prefix = "") {
  auto best = Suggest(word, candidates);
  return best ? " (did you mean " + std::string(prefix) + *best + "?)" : "";
}

// True when `flag` appears before any "--" (the rest is a command's argv).
bool HasFlag(const std::vector<std::string>& args, std::string_view flag) {
  for (const auto& a : args) {
    if (a == "--") return false;
    if (a == flag) return true;
  }
  return false;
}

bool IsHelp(std::string_view word) { return word == "--help" || word == "-h" || word == "help"; }
bool IsGlobalFlag(std::string_view word) { return word == "--json" || word == "--quiet"; }

std::size_t SkipGlobalFlags(const std::vector<std::string>& args, std::size_t i) {
  while (i < args.size() && IsGlobalFlag(args[i])) ++i;
  return i;
}

const Verb* FindVerb(const Group& group, std::string_view name) {
  for (const auto& a : VerbAliases()) {
    if (a.alias == name) name = a.verb;
  }
  for (const auto& v : group.verbs()) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

// "kiln sandbox " for a group's verb, "kiln " for a top-level one.
std::string PrefixOf(const Group* group) {
  return group ? "kiln " + std::string(group->name) + " " : "kiln ";
}

// Checks a verb's flags and arguments (everything after the verb's name).
Invocation ParseVerb(const Group* group, const Verb& verb, std::vector<std::string> rest,
                     Invocation inv) {
  const std::string hint = "see `" + PrefixOf(group) + std::string(verb.name) + " --help`";
  // --help wins even next to a bad flag: it is what a confused user types.
  for (const auto& tok : rest) {
    if (tok == "--") break;
    if (tok == "--help" || tok == "-h") {
      inv.help = VerbHelp(group, verb);
      return inv;
    }
  }
  std::vector<FlagSpec> specs = verb.flags;
  specs.insert(specs.end(), CommonFlags().begin(), CommonFlags().end());
  ParsedArgs parsed;
  try {
    parsed = ParseArgs(rest, specs);
  } catch (const UsageError& e) {
    // "run ls -la" fails on "-la": the real mistake is the missing "--".
    const bool no_separator = std::find(rest.begin(), rest.end(), "--") == rest.end();
    throw UsageError(e.what(), verb.takes_command && no_separator
                                   ? "the command to run goes after --; " + hint
                                   : hint);
  }

  const auto wanted = static_cast<std::size_t>(verb.positionals);
  const std::string noun(!verb.arg_noun.empty() ? verb.arg_noun
                         : group                ? group->id_noun
                                                : "argument");
  if (parsed.positionals.size() < wanted) throw UsageError("missing the " + noun, hint);
  const auto most =
      verb.max_positionals < 0 ? wanted : static_cast<std::size_t>(verb.max_positionals);
  if (parsed.positionals.size() > most) {
    std::string msg = "unexpected argument '" + parsed.positionals[most] + "'";
    if (verb.takes_command) msg += "; the command goes after --";
    throw UsageError(msg, hint);
  }
  for (const auto& p : parsed.positionals) {
    if (p.empty()) throw UsageError("the " + noun + " is empty", hint);
  }
  if (verb.takes_command && !verb.command_optional && parsed.command.empty()) {
    throw UsageError("missing the command to run (put it after --)", hint);
  }
  if (!verb.takes_command && parsed.has_separator) {
    throw UsageError(PrefixOf(group) + std::string(verb.name) + " does not run a command", hint);
  }
  inv.action = Action::kVerb;
  inv.group = group;
  inv.verb = &verb;
  inv.args = std::move(parsed);
  return inv;
}

Invocation ParseGroup(const Group& group, const std::vector<std::string>& args, std::size_t i,
                      Invocation inv) {
  i = SkipGlobalFlags(args, i);
  if (i == args.size() || IsHelp(args[i])) {
    inv.help = GroupHelp(group);
    inv.help_is_error = i == args.size();
    return inv;
  }
  const std::string& name = args[i];
  const Verb* verb = FindVerb(group, name);
  if (verb == nullptr) {
    throw UsageError("unknown " + std::string(group.name) + " verb '" + name + "'" +
                         DidYouMean(name, NamesOf(group.verbs())),
                     "see `kiln " + std::string(group.name) + " --help`");
  }
  std::vector<std::string> rest(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  return ParseVerb(&group, *verb, std::move(rest), std::move(inv));
}

}  // namespace

bool WantsJson(const std::vector<std::string>& args) { return HasFlag(args, "--json"); }

Invocation ParseCommandLine(const std::vector<std::string>& args) {
  Invocation inv;
  inv.json = WantsJson(args);
  inv.quiet = HasFlag(args, "--quiet");
  const std::size_t i = SkipGlobalFlags(args, 0);
  if (i == args.size()) {
    inv.help = TopHelp();
    inv.help_is_error = true;
    return inv;
  }
  const std::string& word = args[i];
  if (IsHelp(word)) {
    inv.help = TopHelp();
    return inv;
  }
  if (word == "--version") {
    inv.action = Action::kVersion;
    return inv;
  }
  std::vector<std::string> names;
  for (const auto& c : Commands()) {
    names.emplace_back(c.name);
    if (word != c.name) continue;
    if (c.group) return ParseGroup(*c.group, args, i + 1, std::move(inv));
    if (c.verb) {
      std::vector<std::string> rest(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      return ParseVerb(nullptr, *c.verb, std::move(rest), std::move(inv));
    }
    inv.action = Action::kServer;
    inv.server_args.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
    return inv;
  }
  if (word.starts_with("-")) {
    std::string_view bare = std::string_view(word).substr(word.find_first_not_of('-'));
    throw UsageError("unknown flag " + word + DidYouMean(bare, TopFlagNames(), "--"),
                     "see `kiln --help`");
  }
  throw UsageError("unknown command '" + word + "'" + DidYouMean(word, names), "see `kiln --help`");
}

int RunCli(const std::vector<std::string>& args) {
  const bool json = WantsJson(args);
  try {
    Invocation inv = ParseCommandLine(args);
    switch (inv.action) {
      case Action::kHelp:
        WriteAll(inv.help_is_error ? STDERR_FILENO : STDOUT_FILENO, inv.help);
        return inv.help_is_error ? 1 : 0;
      case Action::kVersion:
        PrintOut("kiln " KILN_VERSION "\n");
        return 0;
      case Action::kServer:
        return CmdServer(inv.server_args);
      case Action::kVerb: {
        Context ctx(inv.json, inv.quiet);
        return inv.verb->handler(ctx, inv.args);
      }
    }
  } catch (const std::exception& e) {
    ReportError(e, json);
  }
  return 1;
}

}  // namespace kiln::cli
