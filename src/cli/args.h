// Flag parsing shared by every verb: --flag value, --flag=value, repeated
// flags, and "--" ending the flags (the rest is a command's argv).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::cli {

struct FlagSpec {
  std::string name;  // without the dashes: "memory"
  bool takes_value = false;
  bool repeatable = false;
  bool required = false;
  // For shell completion: the values it offers ("a b c"), or kFileValue.
  std::string choices;
  char short_name = 0;  // -t for --tag (only a few verbs use one)
  // For help (help.h): what the value is called ("N", "K=V", "on|off") and
  // what the flag does, its further lines indented under the first. A flag
  // with no help shares the next flag's entry ("--trial, --paid  ...").
  std::string value_name;
  std::string help;
};

inline constexpr std::string_view kFileValue = "<file>";

struct ParsedArgs {
  std::vector<std::string> positionals;
  std::vector<std::string> command;  // everything after "--"
  bool has_separator = false;
  std::map<std::string, std::vector<std::string>, std::less<>> flags;  // booleans hold ""

  bool Has(std::string_view name) const;
  // The value of a single-valued flag, if given.
  std::optional<std::string> Get(std::string_view name) const;
  // Every value of a repeatable flag, in order.
  std::vector<std::string> All(std::string_view name) const;
};

// Throws UsageError naming the offending flag, with a "did you mean" when a
// known flag is close, or a required flag that is missing (unless --help is
// given). `-h` is read as --help when the spec knows "help".
ParsedArgs ParseArgs(const std::vector<std::string>& args, const std::vector<FlagSpec>& specs);

// The closest candidate to `word` (typo or unique-ish prefix), if any is close enough.
std::optional<std::string> Suggest(std::string_view word,
                                   const std::vector<std::string>& candidates);

// Damerau (optimal string alignment) distance: a swap of two letters costs 1.
std::size_t EditDistance(std::string_view a, std::string_view b);

// "K=V" → {K, V}; the key must be non-empty, the value may be empty or hold '='.
std::pair<std::string, std::string> SplitKeyValue(std::string_view flag, std::string_view text);

// A whole decimal integer in [min, max]; the message names the flag.
std::int64_t ParseInt(std::string_view flag, std::string_view text, std::int64_t min,
                      std::int64_t max);

}  // namespace kiln::cli
