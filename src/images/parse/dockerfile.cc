// The Dockerfile parser's instructions (dockerfile_parser.h): the loop over
// logical lines, the dispatch by instruction, and each instruction's
// arguments read into its typed form. Stages and variables are evaluated in
// dockerfile_stages.cc; words and flags are read by dockerfile_lex.cc.
#include "images/parse/dockerfile.h"

#include <algorithm>
#include <set>

#include "common/strings.h"
#include "images/parse/dockerfile_lex.h"
#include "images/parse/dockerfile_parser.h"
#include "images/parse/image_path.h"

namespace kiln::images {
namespace dockerfile_internal {
namespace {

const std::set<std::string, std::less<>> kKnownInstructions = {
    "from",    "run",    "copy",       "add",        "env",         "arg",
    "workdir", "user",   "label",      "cmd",        "entrypoint",  "expose",
    "shell",   "volume", "stopsignal", "maintainer", "healthcheck", "onbuild"};

}  // namespace

Result<Dockerfile> Parser::Parse(const std::vector<LogicalLine>& lines) {
  int count = 0;
  for (const LogicalLine& logical : lines) {
    line_ = logical.line;
    text_ = logical.text;
    std::string_view text = logical.text;
    size_t name_end = 0;
    while (name_end < text.size() && !IsWordSpace(text[name_end])) ++name_end;
    instruction_ = AsciiUpper(text.substr(0, name_end));
    std::string name = AsciiLower(instruction_);
    std::string_view rest = TrimLeft(text.substr(name_end), kWordSpace);
    if (++count > limits_.max_steps) {
      return Error("more than " + std::to_string(limits_.max_steps) +
                   " instructions, the limit for a Dockerfile");
    }
    if (!kKnownInstructions.count(name)) return Error("unknown instruction " + instruction_);
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
  if (Status s = CheckPendingFroms(); !s.ok()) return s;
  return std::move(file_);
}

Status Parser::Error(std::string message) const {
  nlohmann::json details = {{"line", line_}};
  if (!instruction_.empty()) details["instruction"] = instruction_;
  return Status(Code::kInvalidRequest,
                "Dockerfile line " + std::to_string(line_) + ": " + std::move(message),
                std::move(details));
}

Status Parser::WordError(const Status& s) const { return Error(instruction_ + ": " + s.message()); }

void Parser::AddStep(Instruction instruction) {
  file_.stages.back().steps.push_back(Step{line_, text_, std::move(instruction)});
}

Status Parser::NoFlags(const std::vector<Flag>& flags) const {
  if (flags.empty()) return Status::Ok();
  return Error("unknown flag --" + flags.front().name + " for " + instruction_);
}

Status Parser::Dispatch(const std::string& name, std::string_view rest) {
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
    if (signal->empty() || std::any_of(signal->begin(), signal->end(), IsWordSpace)) {
      return Error("STOPSIGNAL needs one signal, like SIGTERM or 15");
    }
    AddStep(StopSignalInstr{std::move(*signal)});
    return Status::Ok();
  }
  return Error("unknown instruction " + instruction_);
}

Result<CommandForm> Parser::Command(std::string_view rest) {
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

Status Parser::Run(const std::vector<Flag>& flags, std::string_view rest) {
  for (const Flag& flag : flags) {
    if (flag.name == "mount") {
      std::string type = "bind";
      const std::string spec = flag.value.value_or("");
      size_t start = 0;
      while (start <= spec.size()) {
        size_t comma = spec.find(',', start);
        std::string_view field = std::string_view(spec).substr(
            start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
        if (field.starts_with("type=")) type = std::string(field.substr(5));
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

Result<std::vector<std::string>> Parser::List(std::string_view rest) {
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

Status Parser::Copy(bool add, const std::vector<Flag>& flags, std::string_view rest) {
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
      if (source.starts_with("http://") || source.starts_with("https://") ||
          source.starts_with("ftp://")) {
        return Error("ADD from a URL is not supported (" + source +
                     "): download it in a RUN step instead");
      }
      if (source.starts_with("git@") || source.starts_with("git://") || source.ends_with(".git")) {
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

Status Parser::Workdir(std::string_view rest) {
  auto path = Words().Word(rest);
  if (!path.ok()) return WordError(path.status());
  if (path->empty()) return Error("WORKDIR needs a path");
  std::string joined = (*path)[0] == '/' ? *path : scope_.workdir + "/" + *path;
  scope_.workdir = CleanPath(joined);
  AddStep(WorkdirInstr{scope_.workdir});
  return Status::Ok();
}

Status Parser::Expose(std::string_view rest) {
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

Result<std::vector<std::pair<std::string, std::string>>> Parser::Pairs(std::string_view rest) {
  std::vector<std::pair<std::string, std::string>> out;
  WordProcessor words = Words();
  std::vector<std::string> raw = SplitRaw(rest, escape_);
  if (raw.empty()) return Error(instruction_ + " needs a name and a value");
  if (FindUnquotedEquals(raw[0], escape_) == std::string::npos) {
    size_t end = 0;
    while (end < rest.size() && !IsWordSpace(rest[end])) ++end;
    std::string_view value_text = TrimLeft(rest.substr(end), kWordSpace);
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

}  // namespace dockerfile_internal

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
  return dockerfile_internal::Parser(build_args, limits, lines->escape, base_scope)
      .Parse(lines->lines);
}

}  // namespace kiln::images
