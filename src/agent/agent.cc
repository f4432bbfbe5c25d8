#include "agent/agent.h"
#include "agent/sudo.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/egress.h"
#include "agent/exec_stream.h"
#include "agent/files.h"
#include "agent/proc_scan.h"
#include "agent/processes.h"
#include "agent/relay.h"
#include "agent/watches.h"

namespace kiln::agent {

using nlohmann::json;

int64_t WallClockMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

Agent::Agent(EventLoop& loop) : loop_(loop), registry_(loop) {
  channel_ = std::make_unique<Channel>(loop, 0, 1, *this);
  processes_ = std::make_unique<ProcessTable>(*this);
  watches_ = std::make_unique<WatchTable>(*this);
  egress_ = std::make_unique<Egress>(*this);
  egress_->Listen();
}

Agent::~Agent() = default;

std::string Agent::NewToken(char kind) {
  return std::string(1, kind) + std::to_string(next_token_++);
}

void Agent::Attach(uint32_t stream, std::unique_ptr<Stream> s) { streams_[stream] = std::move(s); }

void Agent::Finish(uint32_t stream) {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  finished_.push_back(std::move(it->second));
  streams_.erase(it);
  // Destroy after the callback that called us has returned.
  loop_.AddTimer(0, [this] { finished_.clear(); });
}

void Agent::OnData(uint32_t stream, uint8_t channel, std::string data, bool end) {
  auto it = streams_.find(stream);
  if (it != streams_.end()) it->second->OnData(channel, std::move(data), end);
}

void Agent::OnWindow(uint32_t stream, uint32_t bytes) {
  auto it = streams_.find(stream);
  if (it != streams_.end()) it->second->OnWindow(bytes);
}

void Agent::OnCancel(uint32_t stream) {
  processes_->CancelWaiter(stream);
  watches_->CancelWaiter(stream);
  Finish(stream);  // an exec's Command dies with its stream, killing its tree
}

void Agent::OnNewSession() {
  // The previous daemon is gone: nobody will read the answers of its
  // requests. Background processes live on; execs and transfers end.
  for (auto& [id, s] : streams_) finished_.push_back(std::move(s));
  streams_.clear();
  processes_->CancelAllWaiters();
  watches_->CancelAllWaiters();
  egress_->OnNewSession();
  loop_.AddTimer(0, [this] { finished_.clear(); });
}

void Agent::OnRequest(uint32_t stream, json req) {
  std::string op = req.value(proto::kOpKey, "");
  try {
    if (op == proto::kExec) return HandleExec(stream, req.get<proto::ExecRequest>());
    if (op == proto::kPing)
      return channel_->SendResponse(stream, proto::Pong{.ok = true, .time_ms = WallClockMs()});
    if (op == proto::kConfigure) {
      SetSudoAllowed(req.get<proto::ConfigureRequest>().sudo);
      return channel_->SendResponse(stream, proto::Configured{.sudo = SudoAllowed()});
    }
    if (op == proto::kWarm) return channel_->SendResponse(stream, WarmAddressSpace());
    if (op == proto::kOom) {
      pid_t victim = LargestProcess();
      if (victim > 1) ::kill(victim, SIGKILL);
      return channel_->SendResponse(stream, proto::OomKilled{.killed = victim});
    }
    if (op == proto::kEgressListen) return egress_->HandleListen(stream);
    if (op == proto::kEgressAttach)
      return egress_->HandleAttach(stream, req.get<proto::EgressAttachRequest>().conn);
    if (op == proto::kPortDial)
      return DialPort(*this, stream, req.get<proto::PortDialRequest>().port);
    if (op == proto::kArchiveGet) {
      auto get = req.get<proto::ArchiveGetRequest>();
      return HandleArchive(stream, get.path, get.gzip, /*put=*/false);
    }
    if (op == proto::kArchivePut) {
      auto put = req.get<proto::ArchivePutRequest>();
      return HandleArchive(stream, put.path, put.gzip, /*put=*/true);
    }
    if (processes_->Handle(stream, op, req) || watches_->Handle(stream, op, req) ||
        HandleFileOp(*this, stream, op, req))
      return;
    channel_->SendError(stream, "invalid_request", "unknown op '" + op + "'");
  } catch (const json::exception& e) {
    channel_->SendError(stream, "invalid_request", std::string("bad request: ") + e.what());
  }
}

proto::Warmed Agent::WarmAddressSpace() {
  // The child only exits: it never returns to the event loop, touches no
  // file and is reaped here, so nothing of it stays but its PID's number.
  timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid = ::fork();
  if (pid == 0) _exit(0);
  if (pid > 0) {
    int status;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return proto::Warmed{.fork_us =
                           (t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000};
}

void Agent::HandleExec(uint32_t stream, const proto::ExecRequest& req) {
  SpawnSpec spec;
  std::string error = UserSpawnSpec(req, &spec);
  if (!error.empty()) return channel_->SendError(stream, "invalid_request", error);
  ExecOptions opts;
  opts.stdin_data = req.stdin_data;
  opts.timeout_ms = req.timeout_ms;
  opts.capture_limit = req.capture_limit;
  opts.kill_past_limit = req.kill_past_limit;
  ExecStream::Start(*this, stream, std::move(spec), opts);
}

void Agent::HandleArchive(uint32_t stream, const std::string& path, bool gzip, bool put) {
  if (auto error = PrepareArchiveDir(path, put)) return channel_->SendResponse(stream, *error);
  SpawnSpec spec;
  const RunAs& run_as = TheRunAs();
  spec.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + run_as.home};
  spec.cwd = "/";
  if (put) {
    // Unpacked with the user's rights, so the files are the user's.
    spec.uid = run_as.uid;
    spec.gid = run_as.gid;
    spec.argv = {"tar", "-C", path, "-x", "-p", "--no-same-owner", "-f", "-"};
  } else {
    spec.argv = {"tar", "-C", path, "-c", "-f", "-", "."};
  }
  if (gzip) spec.argv.insert(spec.argv.begin() + 3, "-z");
  ExecOptions opts;
  opts.stdin_data = put;
  opts.timeout_ms = 0;
  ExecStream::Start(*this, stream, std::move(spec), opts, json{{"path", path}});
}

std::string UserSpawnSpec(const proto::CommandSpec& req, SpawnSpec* spec) {
  if (req.argv) {
    spec->argv = *req.argv;
    if (spec->argv.empty()) return "argv is empty";
  }
  const RunAs& run_as = TheRunAs();
  std::string shell = Shell();
  if (!req.argv) {
    if (!req.command) return "argv or command is required";
    if (shell.empty())
      return "this image has no shell (/bin/bash or /bin/sh): use argv instead of command";
    spec->argv = {shell, "-c", *req.command};
  }
  spec->cwd = req.cwd.value_or(run_as.workdir);
  spec->uid = req.as_root ? 0 : run_as.uid;
  spec->gid = req.as_root ? 0 : run_as.gid;
  const std::string user = req.as_root ? "root" : run_as.user;
  const std::string home = req.as_root ? "/root" : run_as.home;
  spec->env = {"HOME=" + home, "USER=" + user, "LOGNAME=" + user, "LANG=C.UTF-8"};
  if (!shell.empty()) spec->env.push_back("SHELL=" + shell);
  // The image's ENV over kiln's, the request's over both.
  auto put = [&](const std::string& kv) {
    std::string key = kv.substr(0, kv.find('=') + 1);
    std::erase_if(spec->env,
                  [&](const std::string& e) { return e.compare(0, key.size(), key) == 0; });
    spec->env.push_back(kv);
  };
  for (const auto& kv : run_as.env) put(kv);
  put("PWD=" + spec->cwd);
  for (const char* kv : kEgressEnv) put(kv);
  for (const auto& [k, v] : req.env) put(k + "=" + v);
  return "";
}

std::string SpawnFailureText(const SpawnSpec& spec, const SpawnResult& r) {
  std::string what = r.what == "chdir" ? "cd: " + spec.cwd : spec.argv.empty() ? "" : spec.argv[0];
  std::string reason =
      r.error == ENOENT && r.what == "exec" ? "command not found" : std::strerror(r.error);
  return "kiln: " + what + ": " + reason + "\n";
}

}  // namespace kiln::agent
