// envd's process.Process over kiln's background processes
// (io::SandboxIo::Process*). E2B names a process by its real pid or by the
// tag it was started with; kiln's process list gives pids, and the tags
// (with the variables, which kiln does not list) are kept in EnvdState.
// A Start'ed process outlives its stream, as in E2B: a client that leaves
// only ends kilnd's following of it; Connect-Timeout-Ms is the process's
// own timeout (envd kills it then), kiln's ProcessSpec::timeout_ms.
#include <csignal>

#include "api/e2b/envd/rpc.h"
#include "api/e2b/envd/state.h"
#include "api/errors.h"
#include "api/utf8.h"
#include "common/time.h"
#include "proto/process.pb.h"

namespace kiln::api::e2b {
namespace {

// How long one read of a process's output waits for some: also how soon
// kilnd notices a client that left.
constexpr int64_t kOutputWaitMs = 1000;
constexpr int kOutputCallMs = 31000;
// Most variables and arguments a Start may carry.
constexpr int kMaxEnvs = 1024;
constexpr int kMaxArgs = 65536;

// Go's words for a signal (os.ProcessState.String(), what envd reports).
std::string GoSignalWords(const std::string& signal) {
  if (signal == "SIGKILL") return "killed";
  if (signal == "SIGTERM") return "terminated";
  if (signal == "SIGINT") return "interrupt";
  if (signal == "SIGHUP") return "hangup";
  if (signal == "SIGQUIT") return "quit";
  if (signal == "SIGPIPE") return "broken pipe";
  if (signal == "SIGABRT") return "aborted";
  if (signal == "SIGSEGV") return "segmentation fault";
  if (signal == "SIGUSR1") return "user defined signal 1";
  if (signal == "SIGUSR2") return "user defined signal 2";
  return signal;
}

process::ProcessEvent::EndEvent EndOf(const io::ProcessInfo& p) {
  process::ProcessEvent::EndEvent end;
  if (p.exit_code && !p.signal) {
    end.set_exit_code(*p.exit_code);
    end.set_exited(true);
    end.set_status("exit status " + std::to_string(*p.exit_code));
  } else {
    // As Go's ProcessState: -1 and not exited when a signal ended it.
    end.set_exit_code(-1);
    end.set_exited(false);
    end.set_status("signal: " + GoSignalWords(p.signal.value_or("SIGKILL")));
  }
  if (p.pid == 0) end.set_error("the process did not start");
  return end;
}

template <typename Response>
bool SendEvent(Rpc& rpc, process::ProcessEvent event) {
  Response r;
  *r.mutable_event() = std::move(event);
  return rpc.Send(r);
}

// Streams the process's output from `cursor` to its end, as envd's
// DataEvents, KeepAlives and EndEvent. Returns when it ended, the client
// left (the process runs on) or the call's deadline passed.
template <typename Response>
void Follow(Rpc& rpc, const io::SandboxIo& io, const io::ProcessInfo& started, uint64_t cursor) {
  const bool pty = started.pty.has_value();
  int64_t last_sent = MonotonicNowMs();
  for (;;) {
    if (rpc.ex.ClientGone()) return;
    if (rpc.Expired())
      return rpc.End(Status(Code::kAgentTimeout, "the call's Connect-Timeout-Ms passed"));
    auto page = io.ProcessOutput(started.id, cursor, kOutputWaitMs, kOutputCallMs);
    if (!page.ok()) return rpc.End(page.status());
    for (const auto& chunk : page->chunks) {
      process::ProcessEvent event;
      auto* data = event.mutable_data();
      if (pty)
        data->set_pty(chunk.data);
      else if (chunk.stream == io::OutputStream::kStderr)
        data->set_stderr(chunk.data);
      else
        data->set_stdout(chunk.data);
      if (!SendEvent<Response>(rpc, std::move(event))) return;
      last_sent = MonotonicNowMs();
    }
    cursor = page->next_cursor;
    if (page->complete) {
      // Killed at its Connect-Timeout-Ms: envd's call ends deadline_exceeded
      // then (the SDKs' TimeoutException), not with an end event.
      if (page->process.state == io::ProcessState::kTimedOut)
        return rpc.End(Status(Code::kAgentTimeout, "the process ran past its Connect-Timeout-Ms"));
      process::ProcessEvent event;
      *event.mutable_end() = EndOf(page->process);
      if (SendEvent<Response>(rpc, std::move(event))) rpc.End(Status::Ok());
      return;
    }
    if (MonotonicNowMs() - last_sent >= rpc.keepalive_ms) {
      process::ProcessEvent event;
      event.mutable_keepalive();
      if (!SendEvent<Response>(rpc, std::move(event))) return;
      last_sent = MonotonicNowMs();
    }
  }
}

// The running process a selector names: by pid among kiln's processes, or
// by the tag EnvdState keeps. not_found when none runs.
io::ProcessInfo Resolve(Rpc& rpc, const io::SandboxIo& io,
                        const process::ProcessSelector& selector) {
  switch (selector.selector_case()) {
    case process::ProcessSelector::kPid: {
      for (const auto& p : ValueOrThrow(io.ProcessList())) {
        if (p.pid == static_cast<int>(selector.pid()) && p.state == io::ProcessState::kRunning)
          return p;
      }
      throw ApiError(Code::kNotFound,
                     "process with pid " + std::to_string(selector.pid()) + " not found");
    }
    case process::ProcessSelector::kTag: {
      for (const auto& id :
           EnvdState::Instance().ProcessesByTag(rpc.target.sandbox, selector.tag())) {
        auto p = io.ProcessGet(id);
        if (p.ok() && p->state == io::ProcessState::kRunning) return *p;
      }
      throw ApiError(Code::kNotFound, "process with tag '" + selector.tag() + "' not found");
    }
    default:
      throw InvalidField("process", "must name the process by pid or tag");
  }
}

void Start(Rpc& rpc) {
  process::StartRequest req;
  rpc.ReadRequest(&req);
  const process::ProcessConfig& config = req.process();
  if (config.cmd().empty()) throw InvalidField("process.cmd", "is required");
  if (config.args_size() > kMaxArgs) throw InvalidField("process.args", "has too many arguments");
  if (config.envs_size() > kMaxEnvs) throw InvalidField("process.envs", "has too many variables");
  io::ProcessSpec spec;
  std::vector<std::string> argv{config.cmd()};
  argv.insert(argv.end(), config.args().begin(), config.args().end());
  spec.command.argv = std::move(argv);
  EnvdState::ProcessNote note;
  for (const auto& [k, v] : config.envs()) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos)
      throw InvalidField("process.envs", "'" + k.substr(0, 64) + "' is not a variable's name");
    spec.command.env[k] = v;
    note.envs[k] = v;
  }
  // As envd, a process starts in its user's home: root's is /root; the
  // sandbox user's is the image's WORKDIR (the agent's default directory),
  // or /home/user where that is kiln's /workspace.
  const RunAs& run_as = rpc.target.sandbox->spec().run_as;
  if (config.has_cwd() && !config.cwd().empty())
    spec.command.cwd = ResolvePath(rpc.user, config.cwd(), "process.cwd");
  else if (rpc.user.as_root)
    spec.command.cwd = rpc.user.home;
  else if (run_as.workdir == RunAs{}.workdir)
    spec.command.cwd = kE2bHome;
  if (!rpc.user.as_root && rpc.user.home != run_as.home && !spec.command.env.contains("HOME"))
    spec.command.env["HOME"] = rpc.user.home;
  spec.command.as_root = rpc.user.as_root;
  // Absent means open (envd's older clients); the SDKs send false unless asked.
  spec.stdin_pipe = !req.has_stdin() || req.stdin();
  if (req.has_pty()) {
    io::TerminalSize size;
    if (req.pty().size().cols() > 0) size.cols = static_cast<int>(req.pty().size().cols());
    if (req.pty().size().rows() > 0) size.rows = static_cast<int>(req.pty().size().rows());
    if (size.cols > 1000 || size.rows > 1000)
      throw InvalidField("pty.size", "must be at most 1000 columns and 1000 rows");
    spec.pty = size;
    spec.stdin_pipe = true;
  }
  spec.timeout_ms = rpc.timeout_ms.value_or(0);
  if (req.has_tag()) note.tag = req.tag();

  io::SandboxIo io = rpc.Io();
  auto stream_slot = OpenStream(rpc.ctx, *rpc.target.sandbox);
  io::ProcessInfo p = ValueOrThrow(io.ProcessStart(spec));
  EnvdState::Instance().NoteProcess(rpc.target.sandbox, p.id, std::move(note));
  process::ProcessEvent event;
  event.mutable_start()->set_pid(static_cast<uint32_t>(p.pid));
  if (!SendEvent<process::StartResponse>(rpc, std::move(event))) return;
  Follow<process::StartResponse>(rpc, io, p, 0);
}

void Connect(Rpc& rpc) {
  process::ConnectRequest req;
  rpc.ReadRequest(&req);
  io::SandboxIo io = rpc.Io();
  io::ProcessInfo p = Resolve(rpc, io, req.process());
  auto stream_slot = OpenStream(rpc.ctx, *rpc.target.sandbox);
  process::ProcessEvent event;
  event.mutable_start()->set_pid(static_cast<uint32_t>(p.pid));
  if (!SendEvent<process::ConnectResponse>(rpc, std::move(event))) return;
  // Its output from now on, as envd's subscribers get it.
  Follow<process::ConnectResponse>(rpc, io, p, p.output_bytes);
}

void List(Rpc& rpc) {
  process::ListRequest req;
  rpc.ReadRequest(&req);
  process::ListResponse res;
  for (const auto& p : ValueOrThrow(rpc.Io().ProcessList())) {
    if (p.state != io::ProcessState::kRunning) continue;
    process::ProcessInfo* info = res.add_processes();
    info->set_pid(static_cast<uint32_t>(p.pid));
    process::ProcessConfig* config = info->mutable_config();
    // (UTF-8, as proto3 strings must be.)
    if (!p.argv.empty()) {
      config->set_cmd(SanitizeUtf8(p.argv[0]));
      for (size_t i = 1; i < p.argv.size(); ++i) config->add_args(SanitizeUtf8(p.argv[i]));
    } else {
      config->set_cmd(SanitizeUtf8(p.command));
    }
    config->set_cwd(SanitizeUtf8(p.cwd));
    if (auto note = EnvdState::Instance().Process(rpc.target.sandbox, p.id)) {
      if (note->tag) info->set_tag(*note->tag);
      for (const auto& [k, v] : note->envs) (*config->mutable_envs())[k] = v;
    }
  }
  rpc.Reply(res);
}

// Bytes for a process's stdin (or its terminal's keys).
void WriteInput(const io::SandboxIo& io, const io::ProcessInfo& p,
                const process::ProcessInput& input) {
  switch (input.input_case()) {
    case process::ProcessInput::kStdin:
      ValueOrThrow(io.ProcessWrite(p.id, input.stdin(), false));
      return;
    case process::ProcessInput::kPty:
      ValueOrThrow(io.ProcessWrite(p.id, input.pty(), false));
      return;
    default:
      throw InvalidField("input", "must hold stdin or pty bytes");
  }
}

void SendInput(Rpc& rpc) {
  process::SendInputRequest req;
  rpc.ReadRequest(&req);
  io::SandboxIo io = rpc.Io();
  WriteInput(io, Resolve(rpc, io, req.process()), req.input());
  rpc.Reply(process::SendInputResponse());
}

// Client streaming: a StartEvent naming the process, then its input as it
// comes (read from the body as it arrives), then one answer.
void StreamInput(Rpc& rpc) {
  io::SandboxIo io = rpc.Io();
  std::optional<io::ProcessInfo> p;
  process::StreamInputRequest req;
  while (rpc.NextRequest(&req)) {
    switch (req.event_case()) {
      case process::StreamInputRequest::kStart:
        if (p) throw InvalidField("start", "came twice: the stream names one process");
        p = Resolve(rpc, io, req.start().process());
        break;
      case process::StreamInputRequest::kData:
        if (!p) throw InvalidField("data", "came before the start naming the process");
        WriteInput(io, *p, req.data().input());
        break;
      default:  // keepalive
        break;
    }
  }
  rpc.Reply(process::StreamInputResponse());
}

void SendSignal(Rpc& rpc) {
  process::SendSignalRequest req;
  rpc.ReadRequest(&req);
  std::string signal;
  if (req.signal() == process::SIGNAL_SIGKILL)
    signal = "SIGKILL";
  else if (req.signal() == process::SIGNAL_SIGTERM)
    signal = "SIGTERM";
  else
    throw InvalidField("signal", "must be SIGNAL_SIGTERM or SIGNAL_SIGKILL");
  io::SandboxIo io = rpc.Io();
  ValueOrThrow(io.ProcessSignal(Resolve(rpc, io, req.process()).id, signal));
  rpc.Reply(process::SendSignalResponse());
}

void CloseStdin(Rpc& rpc) {
  process::CloseStdinRequest req;
  rpc.ReadRequest(&req);
  io::SandboxIo io = rpc.Io();
  ValueOrThrow(io.ProcessWrite(Resolve(rpc, io, req.process()).id, "", true));
  rpc.Reply(process::CloseStdinResponse());
}

void Update(Rpc& rpc) {
  process::UpdateRequest req;
  rpc.ReadRequest(&req);
  io::SandboxIo io = rpc.Io();
  io::ProcessInfo p = Resolve(rpc, io, req.process());
  if (req.has_pty()) {
    io::TerminalSize size{static_cast<int>(req.pty().size().cols()),
                          static_cast<int>(req.pty().size().rows())};
    if (size.cols < 1 || size.rows < 1 || size.cols > 1000 || size.rows > 1000)
      throw InvalidField("pty.size", "must be 1 to 1000 columns and rows");
    ValueOrThrow(io.ProcessResize(p.id, size));
  }
  rpc.Reply(process::UpdateResponse());
}

}  // namespace

bool ServeProcessRpc(Rpc& rpc, std::string_view method) {
  if (method == "Start") return Start(rpc), true;
  if (method == "Connect") return Connect(rpc), true;
  if (method == "List") return List(rpc), true;
  if (method == "SendInput") return SendInput(rpc), true;
  if (method == "StreamInput") return StreamInput(rpc), true;
  if (method == "SendSignal") return SendSignal(rpc), true;
  if (method == "CloseStdin") return CloseStdin(rpc), true;
  if (method == "Update") return Update(rpc), true;
  return false;
}

}  // namespace kiln::api::e2b
