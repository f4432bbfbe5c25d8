#include "images/parse/dockerfile.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "common/strings.h"
#include "images/parse/dockerfile_lex.h"

namespace kiln::images {
namespace {

using dockerfile_internal::FindUnquotedEquals;
using dockerfile_internal::LogicalLine;
using dockerfile_internal::Lookup;
using dockerfile_internal::ParseJsonArray;
using dockerfile_internal::SplitRaw;
using dockerfile_internal::WordProcessor;

constexpr std::string_view kPlatform = "linux/amd64";

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }
std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}
std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }
bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}
bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "/a/./b/../c" -> "/a/c"; never above the root.
std::string CleanPath(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string_view part = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  std::string out;
  for (std::string_view p : parts) out.append("/").append(p);
  return out.empty() ? "/" : out;
}

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

struct Flag {
  std::string name;
  std::optional<std::string> value;
};

// Leading "--name[=value]" words; *rest is left at the first other word.
std::vector<Flag> ExtractFlags(std::string_view* rest) {
  std::vector<Flag> flags;
  while (true) {
    std::string_view s = TrimLeft(*rest);
    if (!StartsWith(s, "--")) {
      *rest = s;
      return flags;
    }
    size_t end = 0;
    char quote = 0;
    for (; end < s.size(); ++end) {
      if (quote) {
        if (s[end] == quote) quote = 0;
      } else if (s[end] == '"' || s[end] == '\'') {
        quote = s[end];
      } else if (IsSpace(s[end])) {
        break;
      }
    }
    std::string_view word = s.substr(2, end - 2);
    *rest = s.substr(end);
    Flag flag;
    size_t eq = word.find('=');
    flag.name = std::string(word.substr(0, eq));
    if (eq != std::string_view::npos) {
      std::string_view value = word.substr(eq + 1);
      if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
          value.back() == value.front()) {
        value = value.substr(1, value.size() - 2);
      }
      flag.value = std::string(value);
    }
    flags.push_back(std::move(flag));
  }
}

// A heredoc start (<<EOF, <<-EOF, <<"EOF") at the start of a word.
bool HasHeredoc(std::string_view text) {
  for (size_t pos = text.find("<<"); pos != std::string_view::npos;
       pos = text.find("<<", pos + 2)) {
    if (pos > 0 && !IsSpace(text[pos - 1])) continue;
    size_t i = pos + 2;
    if (i < text.size() && text[i] == '-') ++i;
    if (i < text.size() && (text[i] == '"' || text[i] == '\'')) ++i;
    if (i < text.size() && (std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '_')) {
      return true;
    }
  }
  return false;
}

const std::set<std::string, std::less<>> kKnown = {
    "from",    "run",    "copy",       "add",        "env",         "arg",
    "workdir", "user",   "label",      "cmd",        "entrypoint",  "expose",
    "shell",   "volume", "stopsignal", "maintainer", "healthcheck", "onbuild"};

class Parser {
 public:
  Parser(const std::map<std::string, std::string>& build_args, const DockerfileLimits& limits,
         char escape, const BaseScope& base_scope)
      : build_args_(build_args), limits_(limits), escape_(escape), base_scope_(base_scope) {}

  Result<Dockerfile> Parse(const std::vector<LogicalLine>& lines) {
    int count = 0;
    for (const LogicalLine& logical : lines) {
      line_ = logical.line;
      text_ = logical.text;
      std::string_view text = logical.text;
      size_t name_end = 0;
      while (name_end < text.size() && !IsSpace(text[name_end])) ++name_end;
      instruction_ = AsciiUpper(text.substr(0, name_end));
      std::string name = AsciiLower(instruction_);
      std::string_view rest = TrimLeft(text.substr(name_end));
      if (++count > limits_.max_steps) {
        return Error("more than " + std::to_string(limits_.max_steps) +
                     " instructions, the limit for a Dockerfile");
      }
      if (!kKnown.count(name)) return Error("unknown instruction " + instruction_);
      if (name == "onbuild") return Error("ONBUILD is not supported");
      if (file_.stages.empty() && name != "from" && name != "arg") {
        return Error(instruction_ + " before the first FROM: only ARG may come before it");
      }
      if (Status s = Dispatch(name, rest); !s.ok()) return s;
    }
    if (file_.stages.empty()) {
      line_ = 1;
      instruction_.clear();
      return Error("no FROM instruction");
    }
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
    return std::move(file_);
  }

 private:
  // What a stage carries, and what a stage built on it inherits (not its ARGs).
  struct Scope {
    std::map<std::string, std::string> env;
    std::map<std::string, std::optional<std::string>> args;
    std::string workdir = "/";
    std::vector<std::string> shell = {"/bin/sh", "-c"};
  };
  struct PendingFrom {
    int line;
    int stage;
    std::string instruction;
    std::string from;
  };

  Status Error(std::string message) const {
    nlohmann::json details = {{"line", line_}};
    if (!instruction_.empty()) details["instruction"] = instruction_;
    return Status(Code::kInvalidRequest,
                  "Dockerfile line " + std::to_string(line_) + ": " + std::move(message),
                  std::move(details));
  }
  Status WordError(const Status& s) const { return Error(instruction_ + ": " + s.message()); }

  Lookup StageLookup() const {
    return [this](std::string_view name) -> std::optional<std::string> {
      std::string key(name);
      if (auto it = scope_.env.find(key); it != scope_.env.end()) return it->second;
      if (auto it = scope_.args.find(key); it != scope_.args.end()) return it->second;
      return std::nullopt;
    };
  }
  Lookup MetaLookup() const {
    return [this](std::string_view name) -> std::optional<std::string> {
      if (auto it = meta_.find(std::string(name)); it != meta_.end()) return it->second;
      return std::nullopt;
    };
  }
  WordProcessor Words() const { return WordProcessor(escape_, StageLookup()); }

  void AddStep(Instruction instruction) {
    file_.stages.back().steps.push_back(Step{line_, text_, std::move(instruction)});
  }

  Status NoFlags(const std::vector<Flag>& flags) const {
    if (flags.empty()) return Status::Ok();
    return Error("unknown flag --" + flags.front().name + " for " + instruction_);
  }

  Status Dispatch(const std::string& name, std::string_view rest) {
    if (name == "healthcheck") return Status::Ok();  // accepted, not a step
    std::vector<Flag> flags = ExtractFlags(&rest);
    if (name == "from") return From(flags, rest);
    if (name == "run") return Run(flags, rest);
    if (name == "copy" || name == "add") return Copy(name == "add", flags, rest);
    if (Status s = NoFlags(flags); !s.ok()) return s;
    if (name == "arg") return Arg(rest);
    if (name == "env") {
      auto vars = Pairs(rest);
      if (!vars.ok()) return vars.status();
      for (const auto& [k, v] : *vars) scope_.env[k] = v;
      AddStep(EnvInstr{std::move(*vars)});
      return Status::Ok();
    }
    if (name == "label") {
      auto labels = Pairs(rest);
      if (!labels.ok()) return labels.status();
      AddStep(LabelInstr{std::move(*labels)});
      return Status::Ok();
    }
    if (name == "maintainer") {
      if (rest.empty()) return Error("MAINTAINER needs a name");
      AddStep(LabelInstr{{{"maintainer", std::string(rest)}}});
      return Status::Ok();
    }
    if (name == "workdir") return Workdir(rest);
    if (name == "user") {
      auto user = Words().Word(rest);
      if (!user.ok()) return WordError(user.status());
      if (user->empty()) return Error("USER needs a user");
      AddStep(UserInstr{std::move(*user)});
      return Status::Ok();
    }
    if (name == "cmd" || name == "entrypoint") {
      auto command = Command(rest);
      if (!command.ok()) return command.status();
      if (name == "cmd") {
        AddStep(CmdInstr{std::move(*command)});
      } else {
        AddStep(EntrypointInstr{std::move(*command)});
      }
      return Status::Ok();
    }
    if (name == "expose") return Expose(rest);
    if (name == "shell") {
      auto argv = ParseJsonArray(rest);
      if (!argv || argv->empty()) {
        return Error("SHELL needs a JSON array of strings, like [\"/bin/bash\", \"-c\"]");
      }
      scope_.shell = *argv;
      AddStep(ShellInstr{std::move(*argv)});
      return Status::Ok();
    }
    if (name == "volume") {
      auto paths = List(rest);
      if (!paths.ok()) return paths.status();
      if (paths->empty()) return Error("VOLUME needs at least one path");
      for (const std::string& p : *paths) {
        if (p.empty()) return Error("VOLUME paths cannot be empty");
      }
      AddStep(VolumeInstr{std::move(*paths)});
      return Status::Ok();
    }
    if (name == "stopsignal") {
      auto signal = Words().Word(rest);
      if (!signal.ok()) return WordError(signal.status());
      if (signal->empty() || std::any_of(signal->begin(), signal->end(), IsSpace)) {
        return Error("STOPSIGNAL needs one signal, like SIGTERM or 15");
      }
      AddStep(StopSignalInstr{std::move(*signal)});
      return Status::Ok();
    }
    return Error("unknown instruction " + instruction_);
  }

  Status From(const std::vector<Flag>& flags, std::string_view rest) {
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

  Status Arg(std::string_view rest) {
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

  Result<CommandForm> Command(std::string_view rest) {
    CommandForm form;
    if (auto argv = ParseJsonArray(rest)) {
      form.exec_form = true;
      form.argv = std::move(*argv);
      return form;
    }
    if (rest.empty()) return Error(instruction_ + " needs a command");
    form.shell = std::string(rest);
    form.argv = scope_.shell;
    form.argv.push_back(form.shell);
    return form;
  }

  Status Run(const std::vector<Flag>& flags, std::string_view rest) {
    for (const Flag& flag : flags) {
      if (flag.name == "mount") {
        std::string type = "bind";
        const std::string spec = flag.value.value_or("");
        size_t start = 0;
        while (start <= spec.size()) {
          size_t comma = spec.find(',', start);
          std::string_view field = std::string_view(spec).substr(
              start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
          if (StartsWith(field, "type=")) type = std::string(field.substr(5));
          if (comma == std::string_view::npos) break;
          start = comma + 1;
        }
        return Error("RUN --mount=type=" + type + " is not supported");
      }
      if (flag.name == "network") {
        if (flag.value != "default" && flag.value != "none") {
          return Error("RUN --network=" + flag.value.value_or("") +
                       " is not supported: use default or none");
        }
        continue;
      }
      return Error("RUN --" + flag.name + " is not supported");
    }
    auto command = Command(rest);
    if (!command.ok()) return command.status();
    if (!command->exec_form && HasHeredoc(rest)) {
      return Error("heredocs (<<EOF) are not supported");
    }
    RunInstr run{std::move(*command), {}};
    for (const auto& [name, value] : scope_.args) {
      if (value && !scope_.env.count(name)) run.build_args[name] = *value;
    }
    AddStep(std::move(run));
    return Status::Ok();
  }

  // A JSON array or whitespace-separated words, each expanded.
  Result<std::vector<std::string>> List(std::string_view rest) {
    WordProcessor words = Words();
    if (auto json = ParseJsonArray(rest)) {
      std::vector<std::string> out;
      for (const std::string& item : *json) {
        auto word = words.Word(item);
        if (!word.ok()) return WordError(word.status());
        out.push_back(std::move(*word));
      }
      return out;
    }
    auto out = words.Words(rest);
    if (!out.ok()) return WordError(out.status());
    return out;
  }

  Status Copy(bool add, const std::vector<Flag>& flags, std::string_view rest) {
    CopyInstr copy;
    copy.add = add;
    WordProcessor words = Words();
    for (const Flag& flag : flags) {
      const std::string& f = flag.name;
      if (f == "link") {
        if (flag.value && *flag.value != "true" && *flag.value != "false") {
          return Error("--link takes no value, true or false");
        }
        continue;
      }
      if (f == "exclude" || f == "parents" || (add && (f == "checksum" || f == "keep-git-dir"))) {
        return Error(instruction_ + " --" + f + " is not supported");
      }
      if (f != "from" && f != "chown" && f != "chmod") {
        return Error("unknown flag --" + f + " for " + instruction_);
      }
      if (!flag.value || flag.value->empty()) return Error("--" + f + " needs a value");
      auto value = words.Word(*flag.value);
      if (!value.ok()) return WordError(value.status());
      if (value->empty()) return Error("--" + f + "=" + *flag.value + " expands to nothing");
      if (f == "from") {
        copy.from = *value;
      } else if (f == "chown") {
        copy.chown = *value;
      } else {
        const std::string& mode = *value;
        bool octal = mode.size() <= 5 && std::all_of(mode.begin(), mode.end(),
                                                     [](char c) { return c >= '0' && c <= '7'; });
        uint32_t bits = octal ? static_cast<uint32_t>(std::stoul(mode, nullptr, 8)) : 0;
        if (!octal || bits > 07777) {
          return Error("--chmod=" + mode + " is not an octal mode (like 0755)");
        }
        copy.chmod = bits;
      }
    }
    if (!ParseJsonArray(rest) && HasHeredoc(rest)) {
      return Error("heredocs (<<EOF) are not supported");
    }
    auto args = List(rest);
    if (!args.ok()) return args.status();
    if (args->size() < 2) {
      return Error(instruction_ + " needs at least one source and a destination");
    }
    copy.dest = args->back();
    args->pop_back();
    copy.sources = std::move(*args);
    if (add) {
      for (const std::string& source : copy.sources) {
        if (StartsWith(source, "http://") || StartsWith(source, "https://") ||
            StartsWith(source, "ftp://")) {
          return Error("ADD from a URL is not supported (" + source +
                       "): download it in a RUN step instead");
        }
        if (StartsWith(source, "git@") || StartsWith(source, "git://") ||
            EndsWith(source, ".git")) {
          return Error("ADD from a git repository is not supported (" + source + ")");
        }
      }
    }
    if (copy.from) {
      if (Status s = ResolveFrom(&copy); !s.ok()) return s;
    }
    AddStep(std::move(copy));
    return Status::Ok();
  }

  Status ResolveFrom(CopyInstr* copy) {
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

  Status Workdir(std::string_view rest) {
    auto path = Words().Word(rest);
    if (!path.ok()) return WordError(path.status());
    if (path->empty()) return Error("WORKDIR needs a path");
    std::string joined = (*path)[0] == '/' ? *path : scope_.workdir + "/" + *path;
    scope_.workdir = CleanPath(joined);
    AddStep(WorkdirInstr{scope_.workdir});
    return Status::Ok();
  }

  Status Expose(std::string_view rest) {
    auto words = Words().Words(rest);
    if (!words.ok()) return WordError(words.status());
    if (words->empty()) return Error("EXPOSE needs at least one port");
    ExposeInstr expose;
    for (const std::string& word : *words) {
      size_t slash = word.find('/');
      std::string ports = word.substr(0, slash);
      std::string proto = slash == std::string::npos ? "tcp" : AsciiLower(word.substr(slash + 1));
      size_t dash = ports.find('-');
      std::string low = ports.substr(0, dash);
      std::string high = dash == std::string::npos ? low : ports.substr(dash + 1);
      auto valid = [](const std::string& p) {
        return AllDigits(p) && p.size() <= 5 && std::stoi(p) >= 1 && std::stoi(p) <= 65535;
      };
      if (!valid(low) || !valid(high) || std::stoi(high) < std::stoi(low) ||
          (proto != "tcp" && proto != "udp" && proto != "sctp")) {
        return Error("EXPOSE: invalid port " + Quote(word) +
                     ": a port or range 1-65535, optionally /tcp, /udp or /sctp");
      }
      expose.ports.push_back(ports + "/" + proto);
    }
    AddStep(std::move(expose));
    return Status::Ok();
  }

  // ENV and LABEL: "k v" (legacy: the rest of the line is the value) or "k=v k2="v 2"".
  // Values are expanded against the variables before the instruction.
  Result<std::vector<std::pair<std::string, std::string>>> Pairs(std::string_view rest) {
    std::vector<std::pair<std::string, std::string>> out;
    WordProcessor words = Words();
    std::vector<std::string> raw = SplitRaw(rest, escape_);
    if (raw.empty()) return Error(instruction_ + " needs a name and a value");
    if (FindUnquotedEquals(raw[0], escape_) == std::string::npos) {
      size_t end = 0;
      while (end < rest.size() && !IsSpace(rest[end])) ++end;
      std::string_view value_text = TrimLeft(rest.substr(end));
      if (value_text.empty()) {
        return Error(instruction_ + " " + raw[0] + " needs a value (" + instruction_ +
                     " name value, or name=value)");
      }
      auto key = words.Word(rest.substr(0, end));
      auto value = words.Word(value_text);
      if (!key.ok()) return WordError(key.status());
      if (!value.ok()) return WordError(value.status());
      out.emplace_back(std::move(*key), std::move(*value));
      return out;
    }
    for (const std::string& word : raw) {
      size_t eq = FindUnquotedEquals(word, escape_);
      if (eq == std::string::npos) {
        return Error(instruction_ + ": " + Quote(word) + " is not name=value");
      }
      auto key = words.Word(std::string_view(word).substr(0, eq));
      auto value = words.Word(std::string_view(word).substr(eq + 1));
      if (!key.ok()) return WordError(key.status());
      if (!value.ok()) return WordError(value.status());
      if (key->empty()) return Error(instruction_ + ": " + Quote(word) + " has an empty name");
      out.emplace_back(std::move(*key), std::move(*value));
    }
    return out;
  }

  const std::map<std::string, std::string>& build_args_;
  const DockerfileLimits& limits_;
  const char escape_;
  const BaseScope& base_scope_;
  int line_ = 0;
  std::string text_;
  std::string instruction_;
  std::map<std::string, std::string> meta_;  // global ARGs that have a value
  Dockerfile file_;
  std::vector<Scope> scopes_;  // of the finished stages, by index
  Scope scope_;                // of the current stage
  std::vector<PendingFrom> pending_;
};

}  // namespace

Result<Dockerfile> ParseDockerfile(std::string_view text,
                                   const std::map<std::string, std::string>& build_args,
                                   const DockerfileLimits& limits, const BaseScope& base_scope) {
  if (text.size() > limits.max_bytes) {
    return Status(Code::kPayloadTooLarge,
                  "Dockerfile is " + std::to_string(text.size()) + " bytes; the limit is " +
                      std::to_string(limits.max_bytes),
                  {{"limit", limits.max_bytes}});
  }
  auto lines = dockerfile_internal::SplitLines(text);
  if (!lines.ok()) return lines.status();
  return Parser(build_args, limits, lines->escape, base_scope).Parse(lines->lines);
}

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
          "unknown target " + Quote(*target) +
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
