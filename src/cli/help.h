// Help texts, generated from the command table (command_table.h): a verb's
// usage line and flag list come from its FlagSpecs, so a flag's help is
// written once, beside how it parses.
#pragma once

#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/command_table.h"

namespace kiln::cli {

// `kiln --help`, `kiln GROUP --help`, `kiln [GROUP] VERB --help` (group
// null: a top-level verb such as `kiln usage`).
std::string TopHelp();
std::string GroupHelp(const Group& group);
std::string VerbHelp(const Group* group, const Verb& verb);

// A verb's usage after "kiln GROUP ": its name, positionals, flags and
// "-- CMD...". Each flag is listed ("[--all] [--label K=V]...") while the
// whole fits kUsageWidth columns; past that the optional ones become
// "[OPTIONS]" (required ones stay): "exec ID [OPTIONS] -- CMD...".
std::string Synopsis(const Verb& verb);
inline constexpr std::size_t kUsageWidth = 80;

// The "Options:" lines for `flags`: "  --vcpu N          virtual CPUs",
// one entry per flag with help (flags without join the next one's entry).
std::string FlagList(const std::vector<FlagSpec>& flags);

}  // namespace kiln::cli
