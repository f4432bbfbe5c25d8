#include "cli/args.h"

#include <algorithm>
#include <charconv>

#include "cli/errors.h"

namespace kiln::cli {
namespace {

const FlagSpec* FindSpec(const std::vector<FlagSpec>& specs, std::string_view name) {
  for (const auto& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

[[noreturn]] void UnknownFlag(std::string_view token, std::string_view name,
                              const std::vector<FlagSpec>& specs) {
  std::vector<std::string> names;
  for (const auto& s : specs) names.push_back(s.name);
  std::string msg = "unknown flag " + std::string(token);
  if (auto best = Suggest(name, names)) msg += " (did you mean --" + *best + "?)";
  throw UsageError(msg);
}

}  // namespace

bool ParsedArgs::Has(std::string_view name) const { return flags.find(name) != flags.end(); }

std::optional<std::string> ParsedArgs::Get(std::string_view name) const {
  auto it = flags.find(name);
  if (it == flags.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> ParsedArgs::All(std::string_view name) const {
  auto it = flags.find(name);
  return it == flags.end() ? std::vector<std::string>{} : it->second;
}

ParsedArgs ParseArgs(const std::vector<std::string>& args, const std::vector<FlagSpec>& specs) {
  ParsedArgs out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& tok = args[i];
    if (tok == "--") {
      out.has_separator = true;
      out.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (tok == "-" || tok.empty() || tok[0] != '-') {  // "-" conventionally means stdin
      out.positionals.push_back(tok);
      continue;
    }
    std::string_view body = tok;
    if (tok == "-h") {
      body = "help";
    } else if (body.starts_with("--")) {
      body.remove_prefix(2);
    } else {
      // Single-dash words (-m, -json) are not flags we know unless a spec
      // names that letter; else suggest the long form.
      const FlagSpec* by_letter = nullptr;
      if (body.size() == 2) {
        for (const auto& s : specs)
          if (s.short_name != 0 && s.short_name == body[1]) by_letter = &s;
      }
      if (by_letter == nullptr) UnknownFlag(tok, body.substr(1), specs);
      body = by_letter->name;
    }
    std::optional<std::string> inline_value;
    if (auto eq = body.find('='); eq != std::string_view::npos) {
      inline_value = std::string(body.substr(eq + 1));
      body = body.substr(0, eq);
    }
    const FlagSpec* spec = FindSpec(specs, body);
    if (spec == nullptr) UnknownFlag("--" + std::string(body), body, specs);

    std::string value;
    if (spec->takes_value) {
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < args.size() && args[i + 1] != "--") {
        value = args[++i];
      } else {
        throw UsageError("--" + spec->name + " needs a value");
      }
    } else if (inline_value) {
      throw UsageError("--" + spec->name + " takes no value");
    }
    auto& slot = out.flags[spec->name];
    if (!slot.empty() && !spec->repeatable) {
      throw UsageError("--" + spec->name + " given more than once");
    }
    slot.push_back(std::move(value));
  }
  if (!out.Has("help")) {
    for (const auto& s : specs) {
      if (s.required && !out.Has(s.name)) throw UsageError("missing --" + s.name);
    }
  }
  return out;
}

std::size_t EditDistance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::optional<std::string> Suggest(std::string_view word,
                                   const std::vector<std::string>& candidates) {
  if (word.empty()) return std::nullopt;
  // Short words get less slack, or "-x" would "match" every two-letter flag.
  const std::size_t limit = word.size() <= 3 ? 1 : 2;
  std::optional<std::string> best;
  std::size_t best_distance = limit + 1;
  for (const auto& c : candidates) {
    std::size_t dist = EditDistance(word, c);
    if (dist < best_distance) {
      best_distance = dist;
      best = c;
    }
  }
  if (best) return best;
  // An abbreviation ("--mem") names the flag it starts, when only one does.
  std::optional<std::string> prefix_match;
  for (const auto& c : candidates) {
    if (word.size() >= 2 && c.starts_with(word)) {
      if (prefix_match) return std::nullopt;
      prefix_match = c;
    }
  }
  return prefix_match;
}

std::pair<std::string, std::string> SplitKeyValue(std::string_view flag, std::string_view text) {
  auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw UsageError(std::string(flag) + " expects KEY=VALUE, got '" + std::string(text) + "'");
  }
  return {std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
}

std::int64_t ParseInt(std::string_view flag, std::string_view text, std::int64_t min,
                      std::int64_t max) {
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    throw UsageError(std::string(flag) + " expects a whole number, got '" + std::string(text) +
                     "'");
  }
  if (n < min || n > max) {
    throw UsageError(std::string(flag) + " must be between " + std::to_string(min) + " and " +
                     std::to_string(max) + ", got " + std::to_string(n));
  }
  return n;
}

}  // namespace kiln::cli
