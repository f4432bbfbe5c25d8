#include "agent/processes.h"

#include "agent/agent.h"
#include "common/base64.h"
#include "proto/ops.h"
#include "proto/signals.h"

namespace kiln::agent {

using nlohmann::json;

namespace {
constexpr size_t kRingBytes = 1 << 20;
constexpr size_t kMaxEnded = 128;  // ended processes kept for reads
}  // namespace

struct ProcessTable::Process {
  std::string id;
  uint64_t seq = 0;
  pid_t pid = 0;
  std::vector<std::string> argv;
  std::string command;
  std::string cwd;
  int64_t timeout_ms = 0;
  int64_t started_ms = 0;
  int64_t ended_ms = 0;
  std::string state = "running";
  CommandResult result;
  OutputRing ring{kRingBytes};
  std::unique_ptr<Command> cmd;
  std::list<Waiter> waiters;
  EventLoop::TimerId timeout_timer = 0;
  bool timed_out = false;
  std::optional<proto::TerminalSize> pty;  // its terminal's size, kept after it ends
};

ProcessTable::ProcessTable(Agent& agent) : agent_(agent) {}
ProcessTable::~ProcessTable() = default;

ProcessTable::Process* ProcessTable::Find(const std::string& id) {
  auto it = procs_.find(id);
  return it == procs_.end() ? nullptr : it->second.get();
}

bool ProcessTable::Handle(uint32_t stream, const std::string& op, const json& req) {
  auto& ch = agent_.channel();
  if (op == proto::kProcStart) {
    Start(stream, req.get<proto::ProcStartRequest>());
  } else if (op == proto::kProcList) {
    proto::ProcessList list;
    for (const auto& [id, p] : procs_) list.data.push_back(Info(*p));
    std::sort(list.data.begin(), list.data.end(),
              [](const auto& a, const auto& b) { return a.seq < b.seq; });
    ch.SendResponse(stream, list);
  } else if (op == proto::kProcGet) {
    if (Process* p = Find(stream, req.get<proto::ProcGetRequest>().id))
      ch.SendResponse(stream, Info(*p));
  } else if (op == proto::kProcOutput) {
    auto r = req.get<proto::ProcOutputRequest>();
    if (Process* p = Find(stream, r.id)) Output(stream, *p, r);
  } else if (op == proto::kProcWrite) {
    auto r = req.get<proto::ProcWriteRequest>();
    if (Process* p = Find(stream, r.id)) Write(stream, *p, r);
  } else if (op == proto::kProcSignal) {
    auto r = req.get<proto::ProcSignalRequest>();
    if (Process* p = Find(stream, r.id)) Signal(stream, *p, r.signal);
  } else if (op == proto::kProcResize) {
    auto r = req.get<proto::ProcResizeRequest>();
    if (Process* p = Find(stream, r.id)) Resize(stream, *p, r.size);
  } else {
    return false;
  }
  return true;
}

ProcessTable::Process* ProcessTable::Find(uint32_t stream, const std::string& id) {
  Process* p = Find(id);
  if (!p) agent_.channel().SendError(stream, "not_found", "no process '" + id + "'");
  return p;
}

void ProcessTable::Signal(uint32_t stream, Process& p, const std::string& name) {
  int sig = proto::SignalNumber(name);
  if (sig == 0) return agent_.channel().SendError(stream, "invalid_request", "unknown signal");
  if (p.cmd) p.cmd->Signal(sig);
  agent_.channel().SendResponse(stream, Info(p));
}

void ProcessTable::Resize(uint32_t stream, Process& p, const proto::TerminalSize& size) {
  auto& ch = agent_.channel();
  if (!p.pty)
    return ch.SendError(stream, "invalid_request",
                        "process " + p.id + " has no terminal (start it with pty)");
  if (size.cols < 1 || size.cols > 1000 || size.rows < 1 || size.rows > 1000)
    return ch.SendError(stream, "invalid_request", "cols and rows must be from 1 to 1000");
  if (!p.cmd || !p.cmd->Resize(WindowSize{.cols = size.cols, .rows = size.rows}))
    return ch.SendError(stream, "invalid_request", "process " + p.id + " has ended");
  p.pty = size;
  ch.SendResponse(stream, Info(p));
}

void ProcessTable::Write(uint32_t stream, Process& p, const proto::ProcWriteRequest& req) {
  auto& ch = agent_.channel();
  if (!p.cmd || !p.cmd->stdin_open())
    return ch.SendError(stream, "stdin_closed", "the process's stdin is closed");
  auto data = Base64Decode(req.base64);
  if (!data) return ch.SendError(stream, "invalid_request", "base64 is not valid base64");
  p.cmd->WriteStdin(*data);
  uint64_t offset = p.cmd->stdin_offset();
  if (req.eof) p.cmd->CloseStdin();
  ch.SendResponse(stream, proto::ProcWritten{.offset = offset});
}

void ProcessTable::Start(uint32_t stream, const proto::ProcStartRequest& request) {
  proto::ProcStartRequest req = request;
  if (req.pty) {
    auto [cols, rows] = *req.pty;
    if (cols < 1 || cols > 1000 || rows < 1 || rows > 1000)
      return agent_.channel().SendError(stream, "invalid_request",
                                        "pty: cols and rows must be from 1 to 1000");
    // A terminal with nothing to run gets the login shell, as a login does.
    if (!req.argv && !req.command) {
      std::string shell = Shell();
      if (shell.empty())
        return agent_.channel().SendError(stream, "invalid_request",
                                          "this image has no shell (/bin/bash or /bin/sh): "
                                          "give argv");
      req.argv = std::vector<std::string>{shell, "-l"};
    }
  }
  SpawnSpec spec;
  std::string error = UserSpawnSpec(req, &spec);
  if (!error.empty()) return agent_.channel().SendError(stream, "invalid_request", error);
  // Full-screen programs need to know what they draw on; the request's env
  // (already in spec.env) wins.
  if (req.pty && EnvValue(spec.env, "TERM").empty()) spec.env.push_back("TERM=xterm-256color");
  auto p = std::make_unique<Process>();
  p->seq = next_id_++;
  p->id = "p" + std::to_string(p->seq);
  p->argv = spec.argv;
  p->command = req.command.value_or("");
  if (p->command.empty()) {
    for (const auto& a : p->argv) p->command += (p->command.empty() ? "" : " ") + a;
  }
  p->cwd = spec.cwd;
  p->timeout_ms = req.timeout_ms;
  p->started_ms = WallClockMs();
  p->pty = req.pty;
  Process* raw = p.get();
  Command::Callbacks cb;
  cb.on_output = [this, raw](uint8_t ch, std::string_view d) {
    raw->ring.Append(ch, d);
    WakeWaiters(*raw);
  };
  cb.on_done = [this, raw](const CommandResult& r) {
    raw->result = r;
    raw->ended_ms = WallClockMs();
    raw->state = raw->timed_out ? "timed_out" : r.exited ? "exited" : "killed";
    if (raw->timeout_timer) agent_.loop().CancelTimer(raw->timeout_timer);
    raw->timeout_timer = 0;
    WakeWaiters(*raw);
    // The Command is finished; release its pipes (not from inside its own
    // callback).
    agent_.loop().AddTimer(0, [this, raw] {
      raw->cmd.reset();
      EvictEnded();
    });
  };
  Command::Options opts;
  opts.stdin_pipe = req.stdin_pipe;
  if (req.pty) opts.pty = WindowSize{.cols = req.pty->cols, .rows = req.pty->rows};
  opts.cleanup_on_exit = false;  // a server may leave daemons behind on purpose
  SpawnResult err;
  p->cmd =
      Command::Start(agent_.loop(), agent_.registry(), spec, agent_.NewToken('p'), opts, cb, &err);
  if (!p->cmd) {
    std::string text = SpawnFailureText(spec, err);
    p->ring.Append(2, text);
    p->state = "exited";
    p->result.exited = true;
    p->result.exit_code = err.error == ENOENT ? 127 : 126;
    p->ended_ms = p->started_ms;
  } else {
    p->pid = p->cmd->pid();
  }
  if (p->cmd && p->timeout_ms > 0) {
    raw->timeout_timer = agent_.loop().AddTimer(p->timeout_ms, [raw] {
      raw->timeout_timer = 0;
      raw->timed_out = true;
      if (raw->cmd) raw->cmd->KillAll(true);
    });
  }
  agent_.channel().SendResponse(stream, Info(*p));
  procs_[p->id] = std::move(p);
}

proto::ProcessInfo ProcessTable::Info(const Process& p) const {
  bool running = p.state == "running";
  proto::ProcessInfo info{.id = p.id,
                          .seq = p.seq,
                          .pid = p.pid,
                          .state = p.state,
                          .command = p.command,
                          .argv = p.argv,
                          .cwd = p.cwd,
                          .stdin_open = p.cmd && p.cmd->stdin_open(),
                          .stdin_offset = p.cmd ? p.cmd->stdin_offset() : 0,
                          .timeout_ms = p.timeout_ms,
                          .started_ms = p.started_ms,
                          .output_bytes = p.ring.end_offset(),
                          .first_offset = p.ring.first_offset(),
                          .pty = p.pty};
  if (!running && p.result.exited) info.exit_code = p.result.exit_code;
  if (!running && !p.result.exited) info.signal = proto::SignalName(p.result.signal);
  if (!running) info.ended_ms = p.ended_ms;
  return info;
}

void ProcessTable::Output(uint32_t stream, Process& p, const proto::ProcOutputRequest& req) {
  uint64_t cursor = req.cursor;
  size_t max_bytes = std::min<size_t>(req.max_bytes.value_or(kRingBytes), kRingBytes);
  int64_t wait_ms = std::min<int64_t>(req.wait_ms, 60000);
  bool has_data = p.ring.end_offset() > cursor;
  if (has_data || p.state != "running" || wait_ms <= 0)
    return AnswerOutput(stream, p, cursor, max_bytes);
  Process* raw = &p;
  p.waiters.push_back(Waiter{stream, cursor, max_bytes, 0});
  auto it = std::prev(p.waiters.end());
  it->timer = agent_.loop().AddTimer(wait_ms, [this, raw, stream] {
    for (auto w = raw->waiters.begin(); w != raw->waiters.end(); ++w) {
      if (w->stream == stream) {
        Waiter copy = *w;
        raw->waiters.erase(w);
        AnswerOutput(copy.stream, *raw, copy.cursor, copy.max_bytes);
        return;
      }
    }
  });
}

void ProcessTable::AnswerOutput(uint32_t stream, Process& p, uint64_t cursor, size_t max_bytes) {
  uint64_t dropped = 0;
  auto chunks = p.ring.Read(cursor, max_bytes, &dropped);
  proto::OutputPage page;
  uint64_t next = std::max(cursor, p.ring.first_offset());
  for (auto& c : chunks) {
    next = c.offset + c.data.size();
    page.chunks.push_back(proto::OutputChunk{.offset = c.offset,
                                             .stream = c.channel == 1 ? "stdout" : "stderr",
                                             .data = std::move(c.data)});
  }
  bool running = p.state == "running";
  page.next_cursor = next;
  page.first_offset = p.ring.first_offset();
  page.dropped_bytes = dropped;
  page.complete = !running && next >= p.ring.end_offset();
  page.process = Info(p);
  agent_.channel().SendResponse(stream, page);
}

void ProcessTable::WakeWaiters(Process& p) {
  auto waiters = std::move(p.waiters);
  p.waiters.clear();
  for (auto& w : waiters) {
    agent_.loop().CancelTimer(w.timer);
    AnswerOutput(w.stream, p, w.cursor, w.max_bytes);
  }
}

void ProcessTable::CancelWaiter(uint32_t stream) {
  for (auto& [id, p] : procs_) {
    for (auto w = p->waiters.begin(); w != p->waiters.end(); ++w) {
      if (w->stream == stream) {
        agent_.loop().CancelTimer(w->timer);
        p->waiters.erase(w);
        return;
      }
    }
  }
}

void ProcessTable::CancelAllWaiters() {
  for (auto& [id, p] : procs_) {
    for (auto& w : p->waiters) agent_.loop().CancelTimer(w.timer);
    p->waiters.clear();
  }
}

void ProcessTable::EvictEnded() {
  size_t ended = 0;
  for (const auto& [id, p] : procs_) ended += p->state != "running";
  while (ended > kMaxEnded) {
    auto oldest = procs_.end();
    for (auto it = procs_.begin(); it != procs_.end(); ++it) {
      if (it->second->state != "running" &&
          (oldest == procs_.end() || it->second->seq < oldest->second->seq))
        oldest = it;
    }
    if (oldest == procs_.end()) break;
    procs_.erase(oldest);
    --ended;
  }
}

}  // namespace kiln::agent
