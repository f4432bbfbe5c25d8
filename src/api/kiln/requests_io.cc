// kiln's requests (requests.h) for I/O into a sandbox: exec, processes,
// files, watches, the interpreter, the terminal.
#include <algorithm>
#include <cstdio>
#include <set>

#include "api/context.h"
#include "api/errors.h"
#include "api/kiln/requests.h"
#include "api/kiln/terminal.h"
#include "common/base64.h"
#include "common/contract.h"
#include "common/ids.h"
#include "images/context/dockerignore.h"

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

// argv/command, env, user, cwd of a command body (io puts the sandbox's
// env under the command's).
void ReadCommandFields(FieldReader& f, const control::Sandbox& s, io::Command* command) {
  auto argv = f.StringList("argv", contract::kArgvMax);
  auto line = f.String("command", contract::kCommandMax);
  if (argv && line) f.Issue("argv", "give either argv or command, not both");
  if (!argv && !line && !f.has("argv") && !f.has("command"))
    f.Issue("command", "argv or command is required");
  if (argv && argv->empty()) f.Issue("argv", "must not be empty");
  if (argv && !argv->empty() && (*argv)[0].empty()) f.Issue("argv[0]", "must not be empty");
  command->argv = std::move(argv);
  command->command = std::move(line);
  auto env = f.StringMap("env", 256, 256, contract::kCommandEnvValueMax);
  if (env) {
    for (auto& [k, v] : *env) {
      if (!ValidEnvName(k)) f.Issue("env." + k, "is not a valid variable name");
      if (v.find('\0') != std::string::npos) f.Issue("env." + k, "must not contain a NUL byte");
      command->env[k] = std::move(v);
    }
  }
  if (auto user = f.String("user", 32)) {
    // The API's caller holds the key; the policy inside never reaches this.
    if (*user != "root" && *user != s.spec().run_as.user && *user != "user")
      f.Issue("user", "must be \"root\" or the sandbox's user");
    command->as_root = *user == "root";
  }
  if (auto cwd = f.String("cwd", contract::kPathMax)) {
    if (cwd->empty() || (*cwd)[0] != '/') f.Issue("cwd", "must be an absolute path");
    command->cwd = std::move(cwd);
  }
}

// A required absolute path member of a body.
std::string ReadBodyPath(FieldReader& f, const std::string& name) {
  auto path = f.String(name, contract::kPathMax);
  if (!path) {
    f.Issue(name, "is required");
  } else if (path->empty() || (*path)[0] != '/') {
    f.Issue(name, "must be an absolute path");
  }
  return path.value_or("");
}

// {path, `flag`?}: files:mkdir's and files:remove's body.
std::pair<std::string, bool> ReadPathAndFlag(const json& body, const std::string& flag, bool def) {
  FieldReader f(body);
  std::string path = ReadBodyPath(f, "path");
  bool value = f.Bool(flag).value_or(def);
  f.Finish();
  return {std::move(path), value};
}

// A whole decimal integer query parameter in [min, max], or nullopt when absent.
std::optional<int64_t> OptionalQueryInt(Exchange& ex, const std::string& name, int64_t min,
                                        int64_t max) {
  auto text = ex.Query(name);
  if (!text) return std::nullopt;
  int64_t v = min - 1;
  try {
    size_t used = 0;
    v = std::stoll(*text, &used);
    if (used != text->size()) v = min - 1;
  } catch (...) {
  }
  if (v < min || v > max)
    throw InvalidField("query." + name, "must be an integer from " + std::to_string(min) + " to " +
                                            std::to_string(max));
  return v;
}

// How deep a glob reaches: a "**" anywhere means as deep as allowed, else
// one level per path segment.
int GlobDepth(std::string_view glob) {
  if (glob.find("**") != std::string_view::npos) return contract::kListDepth.max;
  int segments = 1;
  for (char c : glob) segments += c == '/';
  return std::min<int>(segments, contract::kListDepth.max);
}

bool SafeWatchId(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  }
  return true;
}

std::string NewWatchId() {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "w%016llx", static_cast<unsigned long long>(RandomU64()));
  return buf;
}

std::optional<std::vector<std::string>> ReadWatchGlobs(FieldReader& f, const std::string& name) {
  auto globs = f.StringList(name, contract::kWatchGlobs);
  for (const auto& g : globs.value_or(std::vector<std::string>{})) {
    if (g.empty() || g.size() > contract::kWatchGlobMax)
      f.Issue(name, "each pattern must be 1 to " + std::to_string(contract::kWatchGlobMax) +
                        " characters");
  }
  return globs;
}

// A `language` member: python or javascript; an issue naming it otherwise.
std::optional<interpreter::Language> ReadLanguage(FieldReader& f) {
  auto name = f.String("language", 32);
  if (!name) return std::nullopt;
  auto l = interpreter::ParseLanguage(*name);
  if (!l)
    f.Issue("language",
            "must be one of the languages offered: " + std::string(interpreter::kLanguagesOffered));
  return l;
}

}  // namespace

// ---- Exec and processes ----

ExecRequest ReadExec(const json& body, const control::Sandbox& s) {
  FieldReader f(body);
  ExecRequest r;
  ReadCommandFields(f, s, &r.command);
  auto text = f.String("stdin", contract::kStdinMax);
  auto b64 = f.String("stdinBase64", contract::kStdinBase64Max);
  if (text && b64) f.Issue("stdin", "give either stdin or stdinBase64, not both");
  if (text) r.options.stdin_bytes = *text;
  if (b64) {
    r.options.stdin_bytes = Base64Decode(*b64);
    if (!r.options.stdin_bytes) f.Issue("stdinBase64", "is not valid base64");
  }
  r.options.timeout_ms = f.Int("timeoutMs", contract::kExecTimeoutMs);
  r.stream = f.Bool("stream").value_or(false);
  // kiln's own: a command whose output passes the answer's cap is killed at
  // once (graders: its answer is already wrong, and a flood costs CPU).
  bool stop_at_cap = f.Bool("stopAtOutputCap").value_or(false);
  if (stop_at_cap && r.stream) f.Issue("stopAtOutputCap", "applies to JSON answers, not streams");
  if (auto enc = f.String("outputEncoding", 16)) {
    if (*enc != "utf8" && *enc != "base64") f.Issue("outputEncoding", "must be utf8 or base64");
    r.base64 = *enc == "base64";
  }
  f.Finish();
  // The answer's cap per stream: 64 KiB, or 1 MiB past a 60 s timeout.
  r.options.capture_cap = r.stream ? 0 : contract::ExecOutputCap(r.options.timeout_ms);
  r.options.kill_past_cap = stop_at_cap;
  return r;
}

io::ProcessSpec ReadProcessStart(const json& body, const control::Sandbox& s) {
  FieldReader f(body);
  io::ProcessSpec req;
  ReadCommandFields(f, s, &req.command);
  if (auto mode = f.String("stdinMode", 16)) {
    if (*mode != "pipe" && *mode != "none") f.Issue("stdinMode", "must be pipe or none");
    req.stdin_pipe = *mode == "pipe";
  }
  req.timeout_ms = f.Int("timeoutMs", contract::kProcessTimeoutMs);
  // A terminal's stdin is always open: it is how keys reach it.
  req.pty = ReadPtyField(f);
  if (req.pty) req.stdin_pipe = true;
  f.Finish();
  return req;
}

StdinWrite ReadStdinWrite(const json& body) {
  FieldReader f(body);
  StdinWrite w;
  auto data = f.String("data", contract::kStdinMax);
  auto b64 = f.String("base64", contract::kStdinBase64Max);
  w.eof = f.Bool("eof").value_or(false);
  w.offset = f.Int("offset", 0, INT64_MAX);
  if (data && b64) f.Issue("data", "give either data or base64, not both");
  std::optional<std::string> decoded = b64 ? Base64Decode(*b64) : std::nullopt;
  if (b64 && !decoded) f.Issue("base64", "is not valid base64");
  f.Finish();
  w.bytes = b64 ? *decoded : data.value_or("");
  return w;
}

std::string ReadSignal(const json& body) {
  FieldReader f(body);
  std::string sig = f.String("signal", 16).value_or("SIGTERM");
  static const std::set<std::string> kAllowed = {"SIGTERM", "SIGKILL", "SIGINT", "SIGHUP",
                                                 "SIGQUIT", "SIGUSR1", "SIGUSR2"};
  if (!kAllowed.count(sig))
    f.Issue("signal", "must be one of SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2");
  f.Finish();
  return sig;
}

io::TerminalSize ReadResize(const json& body) {
  FieldReader f(body);
  io::TerminalSize size = ReadTerminalSize(f);
  f.Finish();
  return size;
}

FollowQuery ReadFollowQuery(Exchange& ex, const contract::IntField& wait_ms, bool loose_follow) {
  FollowQuery q;
  q.cursor = static_cast<uint64_t>(QueryInt(ex, "cursor", 0, INT64_MAX, 0));
  q.wait_ms = QueryInt(ex, "waitMs", wait_ms.min, wait_ms.max, wait_ms.def);
  std::string follow = ex.Query("follow").value_or("false");
  if (loose_follow && (follow == "True" || follow == "1")) follow = "true";
  if (follow != "true" && follow != "false")
    throw InvalidField("query.follow", "must be true or false");
  q.follow = follow == "true";
  return q;
}

// ---- Files ----

int ReadFileMode(Exchange& ex) {
  auto m = ex.Query("mode");
  if (!m) return 0644;
  bool ok = !m->empty() && m->size() <= 4 && m->find_first_not_of("01234567") == std::string::npos;
  if (!ok) throw InvalidField("query.mode", "must be an octal mode such as 644 or 0755");
  return std::stoi(*m, nullptr, 8);
}

FileListQuery ReadFileList(Exchange& ex) {
  FileListQuery q;
  q.path = QueryPath(ex);
  if (auto g = ex.Query("glob")) {
    std::string_view glob = *g;
    while (glob.substr(0, 2) == "./") glob.remove_prefix(2);
    if (glob.empty() || glob.size() > static_cast<size_t>(contract::kGlobMax) ||
        glob.front() == '/' || !images::ValidGlob(glob))
      throw InvalidField("query.glob",
                         "must be a relative pattern such as *.py or **/*.csv, with every [ "
                         "closed and no trailing backslash");
    q.glob = std::string(glob);
  }
  if (auto h = ex.Query("hidden")) {
    if (*h != "true" && *h != "false") throw InvalidField("query.hidden", "must be true or false");
    q.hidden = *h == "true";
  }
  q.limit = OptionalQueryInt(ex, "limit", 1, contract::kListLimitMax);
  auto depth = OptionalQueryInt(ex, "depth", contract::kListDepth.min, contract::kListDepth.max);
  q.levels = depth    ? static_cast<int>(*depth)
             : q.glob ? GlobDepth(*q.glob)
                      : static_cast<int>(contract::kListDepth.def);
  return q;
}

MkdirRequest ReadMkdir(const json& body) {
  auto [path, parents] = ReadPathAndFlag(body, "parents", true);
  return {std::move(path), parents};
}

RemoveRequest ReadRemove(const json& body) {
  auto [path, recursive] = ReadPathAndFlag(body, "recursive", false);
  return {std::move(path), recursive};
}

RenameRequest ReadRename(const json& body) {
  FieldReader f(body);
  RenameRequest req;
  req.from = ReadBodyPath(f, "from");
  req.to = ReadBodyPath(f, "to");
  req.overwrite = f.Bool("overwrite").value_or(false);
  f.Finish();
  return req;
}

// ---- Watches ----

io::WatchSpec ReadWatch(const json& body) {
  FieldReader f(body);
  io::WatchSpec spec;
  auto path = f.String("path", 4096);
  if (!path)
    f.Issue("path", "is required");
  else if (path->empty() || (*path)[0] != '/')
    f.Issue("path", "must be an absolute path");
  spec.path = path.value_or("");
  // One spelling per directory, so event paths are root + "/" + name.
  while (spec.path.size() > 1 && spec.path.back() == '/') spec.path.pop_back();
  spec.recursive = f.Bool("recursive").value_or(false);
  static const std::set<std::string> kTypes = {"create", "write", "remove", "rename", "chmod"};
  spec.events = f.StringList("events", kTypes.size()).value_or(std::vector<std::string>{});
  for (const auto& e : spec.events) {
    if (!kTypes.count(e))
      f.Issue("events", "'" + e + "' is not one of create, write, remove, rename, chmod");
  }
  spec.include = ReadWatchGlobs(f, "include").value_or(std::vector<std::string>{});
  spec.exclude = ReadWatchGlobs(f, "exclude").value_or(std::vector<std::string>{});
  spec.batch_ms = f.Int("batchMs", contract::kWatchBatchMs);
  spec.timeout_ms = f.Int("timeoutMs", contract::kWatchTimeoutMs);
  spec.max_watches = static_cast<uint32_t>(f.Int("maxWatches", contract::kWatchMaxWatches));
  if (f.Bool("webhook").value_or(false))
    f.Issue("webhook", "kiln sends no webhooks: read the watch's events (GET …/events)");
  auto id = f.String("id", 64);
  if (id && !SafeWatchId(*id)) f.Issue("id", "must be 1 to 64 letters, digits, '-' or '_'");
  spec.id = id.value_or(NewWatchId());
  f.Finish();
  return spec;
}

// ---- The interpreter ----

InterpreterRun ReadInterpreterRun(const json& body) {
  FieldReader f(body);
  InterpreterRun r;
  interpreter::RunRequest& req = r.run;
  req.code = f.String("code", 8 << 20).value_or("");
  if (!f.has("code")) f.Issue("code", "is required");
  req.language = ReadLanguage(f);
  req.context = f.String("context", 63);
  if (req.context && !interpreter::ValidContextId(*req.context))
    f.Issue("context", "must be [a-z0-9][a-z0-9-]*");
  req.timeout_ms = f.Int("timeoutMs", contract::kInterpreterTimeoutMs);
  if (auto env = f.StringMap("env", 256, 256, 32768)) {
    for (const auto& [k, v] : *env)
      if (!ValidEnvName(k)) f.Issue("env", "'" + k + "' is not a variable name");
    req.env = *env;
  }
  r.stream = f.Bool("stream").value_or(false);
  // The reference's; a run whose client leaves is always interrupted here.
  f.Bool("interruptOnDisconnect");
  f.Finish();
  return r;
}

interpreter::ContextSpec ReadContextSpec(const json& body) {
  FieldReader f(body);
  interpreter::ContextSpec spec;
  spec.id = f.String("id", 63);
  if (spec.id && !interpreter::ValidContextId(*spec.id))
    f.Issue("id", "must be [a-z0-9][a-z0-9-]*");
  spec.language = ReadLanguage(f).value_or(interpreter::Language::kPython);
  spec.cwd = f.String("cwd", 4096);
  if (spec.cwd && (spec.cwd->empty() || (*spec.cwd)[0] != '/')) f.Issue("cwd", "must be absolute");
  if (auto env = f.StringMap("env", 256, 256, 32768)) {
    for (const auto& [k, v] : *env)
      if (!ValidEnvName(k)) f.Issue("env", "'" + k + "' is not a variable name");
    spec.env = *env;
  }
  f.Finish();
  return spec;
}

std::string ReadContextParam(Exchange& ex) {
  const std::string& c = ex.params["c"];
  if (!interpreter::ValidContextId(c))
    throw ApiError(Code::kContextNotFound, "no interpreter context '" + c + "'",
                   json{{"contextId", c}});
  return c;
}

// ---- The terminal ----

TerminalQuery ReadTerminalQuery(Exchange& ex) {
  TerminalQuery q;
  if (ex.Query("cols") || ex.Query("rows"))
    q.size =
        io::TerminalSize{.cols = static_cast<int>(QueryInt(ex, "cols", 1, kTerminalMaxCells, 80)),
                         .rows = static_cast<int>(QueryInt(ex, "rows", 1, kTerminalMaxCells, 24))};
  if (auto user = ex.Query("user"); user && *user != "sandbox")
    throw InvalidField("query.user",
                       "must be sandbox: the terminal runs as the sandbox's user (use sudo)");
  if ((q.process_id = ex.Query("processId"))) {
    if (ex.Query("command") || ex.Query("cwd"))
      throw InvalidField("query.processId", "give either processId or command/cwd, not both");
    return q;
  }
  if (auto command = ex.Query("command"); command && !command->empty()) {
    if (command->find('\0') != std::string::npos)
      throw InvalidField("query.command", "must not contain a NUL byte");
    q.command = *command;
  }
  if (ex.Query("cwd")) q.cwd = QueryPath(ex, "cwd");
  return q;
}

}  // namespace kiln::api::v1
