// Stage evaluation for the Dockerfile parser (dockerfile_parser.h): FROM and
// what a stage inherits, ARG (global or in a stage), the variables a word
// sees, COPY --from naming a stage, and the stages a target needs.
#include <algorithm>
#include <set>

#include "common/strings.h"
#include "images/parse/dockerfile.h"
#include "images/parse/dockerfile_parser.h"

namespace kiln::images {
namespace dockerfile_internal {
namespace {

constexpr std::string_view kPlatform = "linux/amd64";

// A stage name as BuildKit accepts it: ^[a-z][a-z0-9-_.]*$ (after lower-casing).
bool ValidStageName(std::string_view name) {
  if (name.empty() || !(name.front() >= 'a' && name.front() <= 'z')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
  });
}

bool ValidArgName(std::string_view name) {
  if (name.empty() || AllDigits(name.substr(0, 1))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

Lookup Parser::StageLookup() const {
  return [this](std::string_view name) -> std::optional<std::string> {
    std::string key(name);
    if (auto it = scope_.env.find(key); it != scope_.env.end()) return it->second;
    if (auto it = scope_.args.find(key); it != scope_.args.end()) return it->second;
    return std::nullopt;
  };
}

Lookup Parser::MetaLookup() const {
  return [this](std::string_view name) -> std::optional<std::string> {
    if (auto it = meta_.find(std::string(name)); it != meta_.end()) return it->second;
    return std::nullopt;
  };
}

Status Parser::From(const std::vector<Flag>& flags, std::string_view rest) {
  for (const Flag& flag : flags) {
    if (flag.name != "platform") return Error("unknown flag --" + flag.name + " for FROM");
    WordProcessor platform_words(escape_, [this](std::string_view name) {
      if (name == "BUILDPLATFORM" || name == "TARGETPLATFORM") {
        return std::optional<std::string>(kPlatform);
      }
      return MetaLookup()(name);
    });
    auto platform = platform_words.Word(flag.value.value_or(""));
    if (!platform.ok()) return WordError(platform.status());
    if (*platform != kPlatform) {
      return Error("FROM --platform=" + *platform + " is not supported: kiln builds " +
                   std::string(kPlatform) + " only");
    }
  }
  std::vector<std::string> words = SplitRaw(rest, escape_);
  if (words.size() != 1 && !(words.size() == 3 && AsciiLower(words[1]) == "as")) {
    return Error("FROM takes an image and an optional AS name (FROM image [AS name])");
  }
  auto image = WordProcessor(escape_, MetaLookup()).Word(words[0]);
  if (!image.ok()) return WordError(image.status());
  if (image->empty()) return Error("FROM's image " + Quote(words[0]) + " expands to nothing");
  if (static_cast<int>(file_.stages.size()) >= limits_.max_stages) {
    return Error("more than " + std::to_string(limits_.max_stages) +
                 " stages, the limit for a Dockerfile");
  }
  Stage stage;
  stage.index = static_cast<int>(file_.stages.size());
  stage.line = line_;
  stage.base = *image;
  if (words.size() == 3) {
    std::string name = AsciiLower(words[2]);
    if (!ValidStageName(name)) {
      return Error("invalid stage name " + Quote(words[2]) +
                   ": a letter, then letters, digits, '-', '_' or '.'");
    }
    for (const Stage& other : file_.stages) {
      if (other.name == name) {
        return Error("stage name " + Quote(name) + " is already used by the stage on line " +
                     std::to_string(other.line));
      }
    }
    stage.name = name;
  }
  std::string base = AsciiLower(stage.base);
  for (const Stage& other : file_.stages) {
    if (other.name == base) stage.base_stage = other.index;
  }
  if (!file_.stages.empty()) scopes_.push_back(std::move(scope_));
  scope_ = stage.base_stage ? scopes_[*stage.base_stage] : Scope{};
  if (!stage.base_stage && base_scope_) {
    if (std::optional<BaseConfig> base_config = base_scope_(stage.base)) {
      for (const std::string& kv : base_config->env) {
        size_t eq = kv.find('=');
        scope_.env[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
      }
      if (!base_config->workdir.empty()) scope_.workdir = base_config->workdir;
    }
  }
  scope_.args.clear();  // ARGs never cross a FROM
  file_.stages.push_back(std::move(stage));
  return Status::Ok();
}

Status Parser::Arg(std::string_view rest) {
  std::vector<std::string> words = SplitRaw(rest, escape_);
  if (words.empty()) return Error("ARG needs a name (ARG name[=default])");
  const bool global = file_.stages.empty();
  for (const std::string& word : words) {
    size_t eq = FindUnquotedEquals(word, escape_);
    std::string name = word.substr(0, eq);
    if (!ValidArgName(name)) return Error("invalid ARG name " + Quote(name));
    std::optional<std::string> value;
    if (eq != std::string::npos) {
      WordProcessor words_here(escape_, global ? MetaLookup() : StageLookup());
      auto expanded = words_here.Word(std::string_view(word).substr(eq + 1));
      if (!expanded.ok()) return WordError(expanded.status());
      value = std::move(*expanded);
    }
    if (auto it = build_args_.find(name); it != build_args_.end()) {
      value = it->second;
    } else if (!value && !global) {
      if (auto it = meta_.find(name); it != meta_.end()) value = it->second;
    }
    if (global) {
      if (value) {
        meta_[name] = *value;
      } else {
        meta_.erase(name);
      }
    } else {
      scope_.args[name] = value;
      AddStep(ArgInstr{name, value});
    }
  }
  return Status::Ok();
}

Status Parser::ResolveFrom(CopyInstr* copy) {
  const Stage& current = file_.stages.back();
  const std::string& from = *copy->from;
  if (AllDigits(from)) {
    if (from.size() > 6 || std::stoi(from) >= current.index) {
      return Error(instruction_ + " --from=" + from +
                   " names a later or the same stage; only earlier stages can be copied from");
    }
    copy->from_stage = std::stoi(from);
    return Status::Ok();
  }
  std::string name = AsciiLower(from);
  if (current.name == name) {
    return Error(instruction_ + " --from=" + from + " names the stage it is in");
  }
  for (const Stage& stage : file_.stages) {
    if (stage.name == name) {
      copy->from = name;  // spelled as Stage::name, so callers may compare the two
      copy->from_stage = stage.index;
      return Status::Ok();
    }
  }
  pending_.push_back({line_, current.index, instruction_, from});  // a later stage, or an image
  return Status::Ok();
}

Status Parser::CheckPendingFroms() {
  for (const PendingFrom& p : pending_) {
    for (const Stage& stage : file_.stages) {
      if (stage.index > p.stage && stage.name == AsciiLower(p.from)) {
        line_ = p.line;
        instruction_ = p.instruction;
        return Error("COPY --from=" + p.from + " names a later stage (line " +
                     std::to_string(stage.line) + "); only earlier stages can be copied from");
      }
    }
  }
  return Status::Ok();
}

}  // namespace dockerfile_internal

Result<std::vector<int>> StagesFor(const Dockerfile& file,
                                   const std::optional<std::string>& target) {
  if (file.stages.empty()) return Status(Code::kInvalidRequest, "the Dockerfile has no stages");
  int start = static_cast<int>(file.stages.size()) - 1;
  if (target) {
    std::string wanted = AsciiLower(*target);
    auto it = std::find_if(file.stages.begin(), file.stages.end(),
                           [&](const Stage& s) { return s.name == wanted; });
    if (it == file.stages.end()) {
      nlohmann::json names = nlohmann::json::array();
      std::string list;
      for (const Stage& s : file.stages) {
        if (!s.name) continue;
        names.push_back(*s.name);
        list += (list.empty() ? "" : ", ") + *s.name;
      }
      return Status(
          Code::kInvalidRequest,
          "unknown target " + dockerfile_internal::Quote(*target) +
              (list.empty() ? ": the Dockerfile names no stages" : ": the stages are " + list),
          {{"target", *target}, {"stages", names}});
    }
    start = it->index;
  }
  std::set<int> needed;
  std::vector<int> todo = {start};
  while (!todo.empty()) {
    int index = todo.back();
    todo.pop_back();
    if (!needed.insert(index).second) continue;
    const Stage& stage = file.stages[index];
    if (stage.base_stage) todo.push_back(*stage.base_stage);
    for (const Step& step : stage.steps) {
      if (auto* copy = std::get_if<CopyInstr>(&step.instruction); copy && copy->from_stage) {
        todo.push_back(*copy->from_stage);
      }
    }
  }
  return std::vector<int>(needed.begin(), needed.end());
}

}  // namespace kiln::images
