// The builders the command table (table_*.cc, command_table.cc) writes its
// flags with, so each flag is one call that says how it parses, how
// completion offers its value, and its help: the only place it is described.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "cli/args.h"

namespace kiln::cli {

// A flag without a value: --all.
inline FlagSpec ToggleFlag(std::string name, std::string help) {
  return {.name = std::move(name), .help = std::move(help)};
}

// A flag with a value named `value_name` in help: --vcpu N.
inline FlagSpec ValueFlag(std::string name, std::string value_name, std::string help) {
  return {.name = std::move(name),
          .takes_value = true,
          .value_name = std::move(value_name),
          .help = std::move(help)};
}

// A value flag that may be given more than once: --env K=V.
inline FlagSpec RepeatedFlag(std::string name, std::string value_name, std::string help) {
  FlagSpec spec = ValueFlag(std::move(name), std::move(value_name), std::move(help));
  spec.repeatable = true;
  return spec;
}

// A value flag the verb cannot run without: --seconds N (`choices` as for
// ChoiceFlag below).
inline FlagSpec RequiredFlag(std::string name, std::string value_name, std::string help,
                             std::string choices = "") {
  FlagSpec spec = ValueFlag(std::move(name), std::move(value_name), std::move(help));
  spec.required = true;
  spec.choices = std::move(choices);
  return spec;
}

// A value flag whose values completion offers: `choices` ("on off"), or
// file names when it is kFileValue.
inline FlagSpec ChoiceFlag(std::string name, std::string value_name, std::string choices,
                           std::string help) {
  FlagSpec spec = ValueFlag(std::move(name), std::move(value_name), std::move(help));
  spec.choices = std::move(choices);
  return spec;
}

// `spec` also spelled -LETTER: -f for --follow.
inline FlagSpec WithShortName(char letter, FlagSpec spec) {
  spec.short_name = letter;
  return spec;
}

// The flags of `parts`, in order: a verb's own beside shared ones.
inline std::vector<FlagSpec> ConcatFlags(std::initializer_list<std::vector<FlagSpec>> parts) {
  std::vector<FlagSpec> flags;
  for (const auto& part : parts) flags.insert(flags.end(), part.begin(), part.end());
  return flags;
}

}  // namespace kiln::cli
