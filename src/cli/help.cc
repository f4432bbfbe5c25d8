#include "cli/help.h"

#include "cli/context.h"
#include "cli/url.h"

namespace kiln::cli {
namespace {

constexpr std::string_view kExitNotes =
    "Exit status: the command's own; 124 if it ran out of time; 128+N if signal N\n"
    "killed it; 130 after Ctrl-C; 1 when kiln itself fails (message on stderr).\n";

constexpr std::size_t kHelpColumn = 20;  // where an entry's text starts
constexpr std::size_t kVerbColumn = 40;  // where `kiln GROUP --help` starts a verb's brief

// "  NAME ...  text" with the text's further lines under its first.
std::string HelpEntry(std::string_view label, std::string_view text) {
  std::string line = "  " + std::string(label);
  // A label too long for the column gets its text on the next line.
  if (line.size() + 1 > kHelpColumn) line += "\n";
  const std::size_t used = line.back() == '\n' ? 0 : line.size();
  line.append(kHelpColumn - used, ' ');
  for (char c : text) {
    line += c;
    if (c == '\n') line.append(kHelpColumn, ' ');
  }
  return line + "\n";
}

// A flag as the flag list shows it: "-o, --output FILE", "--all".
std::string FlagLabel(const FlagSpec& flag) {
  std::string label = flag.short_name ? std::string{'-', flag.short_name} + ", " : "";
  label += "--" + flag.name;
  if (flag.takes_value) label += " " + (flag.value_name.empty() ? "VALUE" : flag.value_name);
  return label;
}

// A flag as a usage line shows it: "-o FILE", "[--label K=V]...", "[-f]".
std::string UsageWord(const FlagSpec& flag) {
  std::string word = flag.short_name ? std::string{'-', flag.short_name} : "--" + flag.name;
  if (flag.takes_value) word += " " + (flag.value_name.empty() ? "VALUE" : flag.value_name);
  if (!flag.required) word = "[" + word + "]";
  return flag.repeatable ? word + "..." : word;
}

// "--json, --quiet and --help".
std::string JoinedNames(const std::vector<FlagSpec>& flags) {
  std::string out;
  for (std::size_t i = 0; i < flags.size(); ++i) {
    if (i > 0) out += i + 1 == flags.size() ? " and " : ", ";
    out += "--" + flags[i].name;
  }
  return out;
}

// "kiln sandbox " for a group's verb, "kiln " for a top-level one.
std::string HelpPrefix(const Group* group) {
  return group ? "kiln " + std::string(group->name) + " " : "kiln ";
}

}  // namespace

std::string Synopsis(const Verb& verb) {
  std::string head(verb.name);
  if (!verb.args.empty()) head += " " + std::string(verb.args);
  std::string listed, required;
  bool has_optional = false;
  for (const auto& flag : verb.flags) {
    listed += " " + UsageWord(flag);
    if (flag.required) required += " " + UsageWord(flag);
    has_optional |= !flag.required;
  }
  std::string tail;
  if (verb.takes_command) tail = verb.command_optional ? " [-- CMD...]" : " -- CMD...";
  std::string whole = head + listed + tail;
  if (!has_optional || whole.size() <= kUsageWidth) return whole;
  return head + required + " [OPTIONS]" + tail;
}

std::string FlagList(const std::vector<FlagSpec>& flags) {
  std::string out, label;
  for (const auto& flag : flags) {
    label += (label.empty() ? "" : ", ") + FlagLabel(flag);
    if (flag.help.empty()) continue;  // described with the next flag
    out += HelpEntry(label, flag.help);
    label.clear();
  }
  if (!label.empty()) out += "  " + label + "\n";
  return out;
}

std::string TopHelp() {
  std::string commands_text;
  for (const auto& c : Commands()) commands_text += HelpEntry(c.synopsis, c.brief);
  return "Usage: kiln COMMAND [ARGS...]\n"
         "\n"
         "kiln is the command-line client of kilnd, the kiln sandbox daemon.\n"
         "\n"
         "Commands:\n" +
         commands_text +
         "\n"
         "Options:\n" +
         FlagList(TopFlags()) +
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
         "  kiln sandbox run -- python3 -c 'print(6 * 7)'\n"
         "  source <(kiln completion bash)   # tab completion in this shell\n";
}

std::string GroupHelp(const Group& group) {
  const std::string name(group.name);
  std::string out = "Usage: kiln " + name + " VERB [OPTIONS] [ARGS]\n\nVerbs:\n";
  for (const auto& v : group.verbs()) {
    std::string line = "  " + Synopsis(v);
    // A synopsis too long for the column gets its brief on the next line.
    if (line.size() >= kVerbColumn) line += "\n";
    line.append(line.size() < kVerbColumn ? kVerbColumn - line.size() : kVerbColumn, ' ');
    out += line + std::string(v.brief) + "\n";
  }
  out += "\nEvery verb takes " + JoinedNames(CommonFlags()) + "; `kiln " + name +
         " VERB --help` lists its options.\n";
  out += std::string(group.notes);
  return out;
}

std::string VerbHelp(const Group* group, const Verb& verb) {
  std::string out = "Usage: " + HelpPrefix(group) + Synopsis(verb) + "\n\n" +
                    std::string(verb.summary) + "\n\nOptions:\n" + FlagList(verb.flags) +
                    FlagList(CommonFlags());
  if (verb.takes_command) out += "\n" + std::string(kExitNotes);
  return out;
}

}  // namespace kiln::cli
