#include "interpreter/interpreter.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "common/base64.h"
#include "common/ids.h"
#include "common/json_bounded.h"
#include "common/time.h"
#include "interpreter/kernels.h"

namespace kiln::interpreter {

using nlohmann::json;

namespace {

constexpr std::string_view kContextMarker = "kiln-context=";
constexpr std::string_view kLanguageMarker = "kiln-language=";
constexpr std::string_view kEnvMarker = "kiln-env=";  // base64 of a JSON object
constexpr std::string_view kDeletedMarker = "kiln-deleted";
constexpr size_t kTailBytes = 64 << 10;  // read back for a context's count and state

// A process of the sandbox read as a context, by its markers.
struct Kernel {
  io::ProcessInfo process;
  std::string id;
  Language language = Language::kPython;
  std::map<std::string, std::string> env;
  bool deleted = false;
};

std::optional<Kernel> AsKernel(const io::ProcessInfo& p) {
  Kernel k;
  bool has_language = false;
  for (const auto& a : p.argv) {
    std::string_view arg = a;
    if (arg.starts_with(kContextMarker)) {
      k.id = arg.substr(kContextMarker.size());
    } else if (arg.starts_with(kLanguageMarker)) {
      auto l = ParseLanguage(arg.substr(kLanguageMarker.size()));
      if (!l) return std::nullopt;
      k.language = *l;
      has_language = true;
    } else if (arg.starts_with(kEnvMarker)) {
      auto text = Base64Decode(arg.substr(kEnvMarker.size()));
      auto j = text ? ParseJsonBounded(*text, nullptr, 4) : std::nullopt;
      if (j && j->is_object()) {
        for (const auto& [key, v] : j->items())
          if (v.is_string()) k.env[key] = v.get<std::string>();
      }
    } else if (arg == kDeletedMarker) {
      k.deleted = true;
    }
  }
  if (!has_language || !ValidContextId(k.id)) return std::nullopt;
  k.process = p;
  return k;
}

// The newest process of each context, oldest context first.
Result<std::vector<Kernel>> Kernels(const io::SandboxIo& io) {
  auto procs = io.ProcessList();
  if (!procs.ok()) return procs.status();
  std::vector<Kernel> out;
  for (const auto& p : *procs) {
    auto k = AsKernel(p);
    if (!k) continue;
    auto same =
        std::find_if(out.begin(), out.end(), [&](const Kernel& o) { return o.id == k->id; });
    if (same == out.end()) {
      out.push_back(std::move(*k));
    } else if (k->process.seq > same->process.seq) {
      *same = std::move(*k);
    }
  }
  std::erase_if(out, [](const Kernel& k) { return k.deleted; });
  return out;
}

Result<Kernel> FindKernel(const io::SandboxIo& io, const std::string& id) {
  auto all = Kernels(io);
  if (!all.ok()) return all.status();
  for (auto& k : *all)
    if (k.id == id) return std::move(k);
  return Status(Code::kContextNotFound, "no interpreter context '" + id + "'",
                json{{"contextId", id}});
}

bool Alive(const Kernel& k) { return k.process.state == io::ProcessState::kRunning; }

// What the tail of a kernel's output says: its last execution count, and
// whether a run started there has not ended.
struct Tail {
  std::optional<int64_t> count;
  bool busy = false;
};

Tail ReadTail(const io::SandboxIo& io, const Kernel& k) {
  Tail t;
  const io::ProcessInfo& p = k.process;
  uint64_t from =
      std::max(p.first_offset, p.output_bytes > kTailBytes ? p.output_bytes - kTailBytes : 0);
  auto page = io.ProcessOutput(p.id, from, 0, 10000);
  if (!page.ok()) return t;
  LineSplitter split(kTailBytes);
  std::vector<std::string> lines;
  bool first = from > 0;  // a line cut at the start is not whole
  for (const auto& c : page->chunks)
    if (c.stream == io::OutputStream::kStdout) split.Feed(c.data, &lines);
  for (size_t i = first ? 1 : 0; i < lines.size(); ++i) {
    auto m = ParseKernelLine(lines[i]);
    if (!m) continue;
    if (m->kind == KernelMessage::kReady && from == 0) t.count = 0;
    if (m->kind == KernelMessage::kStart) t.busy = true, t.count = m->n;
    if (m->kind == KernelMessage::kDone) t.busy = false, t.count = m->n;
  }
  return t;
}

ContextInfo Info(const Kernel& k, const Tail& tail) {
  ContextInfo c;
  c.id = k.id;
  c.language = k.language;
  c.cwd = k.process.cwd;
  c.state = !Alive(k) ? "dead" : tail.busy ? "busy" : "running";
  c.execution_count = tail.count;
  c.created_ms = k.process.started_ms;
  c.pid = k.process.pid;
  c.process_id = k.process.id;
  return c;
}

std::vector<std::string> KernelArgv(Language language, const std::string& id,
                                    const std::map<std::string, std::string>& env, bool tombstone) {
  std::vector<std::string> argv;
  if (!RunsOnNode(language))
    argv = {"python3", "-u", "-c", tombstone ? "" : std::string(kKernelPython)};
  else
    argv = {"node", "--expose-internals", "-e", tombstone ? "" : std::string(kKernelJavaScript)};
  argv.push_back(std::string(kContextMarker) + id);
  argv.push_back(std::string(kLanguageMarker) + std::string(LanguageName(language)));
  if (!env.empty() && !tombstone)
    argv.push_back(std::string(kEnvMarker) + Base64Encode(json(env).dump()));
  if (tombstone) argv.push_back(std::string(kDeletedMarker));
  return argv;
}

Result<io::ProcessInfo> StartKernel(const io::SandboxIo& io, Language language,
                                    const std::string& id, const std::optional<std::string>& cwd,
                                    const std::map<std::string, std::string>& env,
                                    bool tombstone = false) {
  io::ProcessSpec spec;
  spec.command.argv = KernelArgv(language, id, env, tombstone);
  spec.command.env = env;
  // Figures render to PNG, never to a display the sandbox does not have.
  spec.command.env.emplace("MPLBACKEND", "Agg");
  spec.command.cwd = cwd;
  // Its folder by the name it was given, as a shell started there has it
  // (bash's pwd, Java's user.dir; in images whose /home/user is a link).
  if (cwd) spec.command.env.emplace("PWD", *cwd);
  spec.stdin_pipe = !tombstone;
  auto p = io.ProcessStart(spec);
  if (!p.ok()) return p.status();
  if (!tombstone && p->state != io::ProcessState::kRunning) {
    const char* program = RunsOnNode(language) ? "node" : "python3";
    return Status(
        Code::kInvalidRequest,
        std::string("body.language: ") + std::string(LanguageName(language)) + " needs `" +
            program + "` in the sandbox's image, and it did not start",
        json{{"issues", json::array({{{"path", "body.language"},
                                      {"message", "has no interpreter in this image"}}})}});
  }
  return p;
}

// Waits up to `ms` for a process to end.
bool WaitEnded(const io::SandboxIo& io, const std::string& process_id, int64_t ms) {
  int64_t until = MonotonicNowMs() + ms;
  do {
    auto p = io.ProcessGet(process_id);
    if (!p.ok() || p->state != io::ProcessState::kRunning) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (MonotonicNowMs() < until);
  return false;
}

std::string NewExecutionId() {
  char buf[24];
  std::snprintf(buf, sizeof buf, "x%016llx", static_cast<unsigned long long>(RandomU64()));
  return buf;
}

}  // namespace

Result<std::vector<ContextInfo>> Interpreter::List(const io::SandboxIo& io) const {
  auto all = Kernels(io);
  if (!all.ok()) return all.status();
  std::vector<ContextInfo> out;
  for (const auto& k : *all) out.push_back(Info(k, Alive(k) ? ReadTail(io, k) : Tail{}));
  return out;
}

Result<ContextInfo> Interpreter::Get(const io::SandboxIo& io, const std::string& id) const {
  auto k = FindKernel(io, id);
  if (!k.ok()) return k.status();
  return Info(*k, Alive(*k) ? ReadTail(io, *k) : Tail{});
}

Result<ContextInfo> Interpreter::Create(const io::SandboxIo& io, const ContextSpec& spec) const {
  std::string id = spec.id.value_or(std::string(LanguageName(spec.language)));
  auto existing = FindKernel(io, id);
  if (existing.ok() && Alive(*existing))
    return Status(Code::kContextExists, "interpreter context '" + id + "' exists",
                  json{{"contextId", id}});
  auto p = StartKernel(io, spec.language, id, spec.cwd, spec.env);
  if (!p.ok()) return p.status();
  Kernel k{.process = *p, .id = id, .language = spec.language, .env = spec.env};
  return Info(k, Tail{.count = 0});
}

Result<ContextInfo> Interpreter::Restart(const io::SandboxIo& io, const std::string& id) const {
  auto k = FindKernel(io, id);
  if (!k.ok()) return k.status();
  if (Alive(*k)) {
    (void)io.ProcessSignal(k->process.id, "SIGKILL");
    WaitEnded(io, k->process.id, 5000);
  }
  auto p = StartKernel(io, k->language, id, k->process.cwd, k->env);
  if (!p.ok()) return p.status();
  Kernel fresh{.process = *p, .id = id, .language = k->language, .env = k->env};
  return Info(fresh, Tail{.count = 0});
}

Result<bool> Interpreter::Interrupt(const io::SandboxIo& io, const std::string& id) const {
  auto k = FindKernel(io, id);
  if (!k.ok()) return k.status();
  if (!Alive(*k)) return false;
  bool busy = ReadTail(io, *k).busy;
  auto s = io.ProcessSignal(k->process.id, "SIGINT");
  if (!s.ok()) return s.status();
  return busy;
}

Result<bool> Interpreter::Remove(const io::SandboxIo& io, const std::string& id) const {
  auto k = FindKernel(io, id);
  if (!k.ok()) return k.status();
  if (Alive(*k)) {
    (void)io.ProcessWrite(k->process.id, "{\"op\":\"exit\"}\n", true);
    if (!WaitEnded(io, k->process.id, 2000)) {
      (void)io.ProcessSignal(k->process.id, "SIGKILL");
      WaitEnded(io, k->process.id, 5000);
    }
  }
  // A tombstone: the context's newest process says it was deleted, so the
  // ended kernel is not listed as dead (the list is all there is).
  auto t = StartKernel(io, k->language, id, k->process.cwd, {}, true);
  if (!t.ok()) return t.status();
  return true;
}

Result<Execution> Interpreter::Run(const io::SandboxIo& io, const std::string& sandbox_id,
                                   const RunRequest& req, const EventSink& sink) {
  Language language = req.language.value_or(Language::kPython);
  std::string id = req.context.value_or(std::string(LanguageName(language)));
  Execution e;
  e.id = NewExecutionId();
  e.context_id = id;
  int64_t t0 = MonotonicNowMs();

  auto found = FindKernel(io, id);
  if (!found.ok() && found.status().code() != Code::kContextNotFound) return found.status();
  bool is_default = ParseLanguage(id).has_value();
  if (!found.ok() && !is_default) return found.status();
  if (found.ok()) {
    if (req.language && found->language != *req.language)
      return Status(
          Code::kInvalidRequest,
          "body.language: context '" + id + "' runs " + std::string(LanguageName(found->language)),
          json{{"issues", json::array({{{"path", "body.language"},
                                        {"message", "does not match the context's"}}})}});
    if (!Alive(*found))
      return Status(Code::kContextDead,
                    "interpreter context '" + id + "' is dead (its kernel ended); restart it",
                    json{{"contextId", id}});
  }
  if (!found.ok() && req.language && *ParseLanguage(id) != *req.language)
    return Status(Code::kInvalidRequest,
                  "body.language: context '" + id + "' is the " + id + " context",
                  json{{"issues", json::array({{{"path", "body.language"},
                                                {"message", "does not match the context's"}}})}});

  std::string key = sandbox_id + "/" + id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_.insert(key).second)
      return Status(Code::kBusy, "interpreter context '" + id + "' is running code",
                    json{{"contextId", id}});
  }
  struct Release {
    Interpreter* self;
    std::string key;
    ~Release() {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->running_.erase(key);
    }
  } release{this, key};

  Kernel k;
  uint64_t cursor = 0;
  if (found.ok()) {
    k = std::move(*found);
    // A run left by an earlier kilnd (before a restart) may still hold the
    // kernel: this request then waits behind it in the kernel's stdin, and
    // its lines are skipped until this run's own start.
    cursor = k.process.output_bytes;
  } else {
    auto p = StartKernel(io, *ParseLanguage(id), id, req.cwd, {});
    if (!p.ok()) return p.status();
    k = Kernel{.process = *p, .id = id, .language = *ParseLanguage(id)};
    e.context_started = true;
  }
  e.language = k.language;
  const std::string& pid = k.process.id;
  json request{{"op", "run"}, {"id", e.id}, {"code", req.code}};
  if (!req.env.empty()) request["env"] = req.env;
  auto written = io.ProcessWrite(
      pid, request.dump(-1, ' ', false, json::error_handler_t::replace) + "\n", false);
  if (!written.ok()) return written.status();

  ExecutionBuilder build(&e);
  LineSplitter split;
  int64_t deadline = req.timeout_ms > 0 ? t0 + req.timeout_ms : INT64_MAX;
  int64_t interrupted_at = 0;
  bool timed_out = false, begun = false, done = false, ended = false;
  auto interrupt = [&] {
    if (interrupted_at) return;
    interrupted_at = MonotonicNowMs();
    (void)io.ProcessSignal(pid, "SIGINT");
  };
  while (!done) {
    int64_t now = MonotonicNowMs();
    if (now >= deadline && !interrupted_at) {
      timed_out = true;
      interrupt();
    }
    if (interrupted_at && now >= interrupted_at + kInterruptGraceMs) {
      // The kernel did not come back: it is killed, the context dead
      // (listed as dead once the answer is out: the kill is waited for).
      (void)io.ProcessSignal(pid, "SIGKILL");
      WaitEnded(io, pid, 5000);
      ended = true;
      break;
    }
    int64_t next = interrupted_at ? interrupted_at + kInterruptGraceMs : deadline;
    int64_t wait = std::clamp<int64_t>(next - now, 1, 1000);
    auto page = io.ProcessOutput(pid, cursor, wait, static_cast<int>(wait) + 15000);
    if (!page.ok()) {
      if (!begun) return page.status();
      ended = true;
      break;
    }
    e.lost_bytes += page->dropped_bytes;
    cursor = page->next_cursor;
    std::vector<std::string> lines;
    for (const auto& c : page->chunks)
      if (c.stream == io::OutputStream::kStdout) split.Feed(c.data, &lines);
    for (const auto& line : lines) {
      auto m = ParseKernelLine(line);
      if (!m) continue;
      if (!begun) {
        if (m->kind != KernelMessage::kStart || m->id != e.id) continue;
        begun = true;
        build.Apply(*m);
        if (sink && !sink(json{{"k", "start"},
                               {"id", e.id},
                               {"contextId", id},
                               {"language", LanguageName(e.language)},
                               {"executionCount", m->n},
                               {"contextStarted", e.context_started}}))
          interrupt();
        continue;
      }
      if (m->kind == KernelMessage::kStart || m->kind == KernelMessage::kReady) continue;
      if (m->kind == KernelMessage::kDone) {
        if (m->id != e.id) continue;
        build.Apply(*m);
        done = true;
        break;
      }
      json ev = build.Apply(*m);
      if (sink && !ev.is_null() && !sink(ev)) interrupt();
    }
    if (done) break;
    if (sink && !sink(nullptr)) interrupt();  // a liveness check of the caller
    if (page->complete) {
      ended = true;
      break;
    }
  }
  build.Overflow("protocol", split.dropped());
  if (!done)
    e.status = timed_out ? "timeout" : "lost";
  else if (timed_out && e.status == "interrupted")
    e.status = "timeout";
  if (ended && !done && !timed_out) e.status = "lost";
  e.duration_ms = MonotonicNowMs() - t0;
  return e;
}

Interpreter& SharedInterpreter() {
  static Interpreter* shared = new Interpreter();  // never destroyed: runs may outlive main
  return *shared;
}

}  // namespace kiln::interpreter
