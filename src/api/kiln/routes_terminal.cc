// GET /v1/sandboxes/{id}/terminal: an interactive terminal over a WebSocket.
//
// The session is a background process on a pseudo-terminal (a process
// started with pty), new or attached by processId. Binary frames are
// terminal bytes both ways; text frames are JSON (api/kiln/terminal.h).
// Keys go in by ProcessWrite, one per client frame, on the connection's thread;
// output comes out by a long poll on the process's output cursor
// (ProcessOutput), on a second thread, answered by the agent as soon as the
// terminal writes. So an echo costs two agent round trips, and nothing
// polls on a timer while bytes flow.
#include <atomic>
#include <chrono>
#include <thread>

#include "api/auth.h"
#include "api/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/requests.h"
#include "api/kiln/routes.h"
#include "api/kiln/terminal.h"
#include "api/terminal_tickets.h"
#include "api/validate.h"
#include "common/time.h"

namespace kiln::api::v1 {

namespace {

// How long one output poll waits in the agent when nothing comes: only how
// soon an idle attached session notices that its client left.
constexpr int64_t kOutputWaitMs = 2000;
// An attach replays this much of the kept output, enough to see where the
// terminal was without drawing a long history again.
constexpr uint64_t kAttachReplay = 64 * 1024;

// RFC 6455 close codes.
constexpr uint16_t kCloseNormal = 1000;
constexpr uint16_t kClosePolicy = 1008;  // the request was refused
constexpr uint16_t kCloseError = 1011;   // the server failed

class TerminalSession {
 public:
  TerminalSession(ApiContext& ctx, Exchange& ex, WebSocket& ws) : ctx_(ctx), ex_(ex), ws_(ws) {}

  void Run() {
    try {
      Open();
    } catch (const ApiError& e) {
      Fail(e.status());
      // Serves the socket until the error frame and the close went out.
      return ws_.Run([](std::string_view, bool) {});
    }
    ws_.Send(TerminalReadyFrame(id_), false);
    std::jthread pump([this](std::stop_token stop) { Pump(stop); });
    ws_.Run([this](std::string_view data, bool binary) { OnMessage(data, binary); });
    pump.request_stop();
    // A terminal closed by its client hangs up the shell it started, as
    // closing a terminal window does; an attached one keeps running.
    if (started_ && !ended_) HangUp();
  }

 private:
  // SIGHUP, as a closed terminal sends. An interactive bash in gVisor was
  // seen to lose one that came right after a SIGWINCH (1 in 4 runs of the
  // attach test), so it is sent again until the shell ends, and after 2 s
  // the shell is killed: a session's shell must not outlive it unseen.
  void HangUp() {
    using std::chrono::steady_clock;
    auto deadline = steady_clock::now() + std::chrono::seconds(2);
    for (int round = 0; steady_clock::now() < deadline; ++round) {
      if (round % 10 == 0) (void)io_->ProcessSignal(id_, "SIGHUP");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      auto info = io_->ProcessGet(id_);
      if (!info.ok() || info->state != io::ProcessState::kRunning) return;
    }
    (void)io_->ProcessSignal(id_, "SIGKILL");
  }

  // Starts or finds the process; throws ApiError for the client to read.
  void Open() {
    auto sandbox = FindSandbox(ctx_, ex_);
    io_.emplace(RunningIo(ctx_, ex_, *sandbox));
    TerminalQuery q = ReadTerminalQuery(ex_);
    if (const auto& pid = q.process_id) {
      io::ProcessInfo info = ValueOrThrow(io_->ProcessGet(*pid));
      if (!info.pty)
        throw ApiError(Code::kInvalidRequest,
                       "process " + *pid + " has no terminal (start it with pty)");
      if (q.size && info.state == io::ProcessState::kRunning)
        ValueOrThrow(io_->ProcessResize(*pid, *q.size));
      id_ = info.id;
      uint64_t end = info.output_bytes;
      cursor_ = std::max(info.first_offset, end > kAttachReplay ? end - kAttachReplay : 0);
      return;
    }
    io::ProcessSpec req;  // io puts the sandbox's env under it
    req.command.command = q.command;
    req.command.cwd = q.cwd;
    req.pty = q.size.value_or(kDefaultTerminalSize);
    req.stdin_pipe = true;
    io::ProcessInfo info = ValueOrThrow(io_->ProcessStart(req));
    id_ = info.id;
    started_ = true;
  }

  void OnMessage(std::string_view data, bool binary) {
    if (binary) {
      if (data.empty()) return;
      auto written = io_->ProcessWrite(id_, data, false);
      // Keys typed after the shell exited are dropped; the exit frame follows.
      if (!written.ok() && written.status().code() != Code::kStdinClosed)
        ws_.Send(TerminalErrorFrame(written.status()), false);
      return;
    }
    TerminalControl control = ParseTerminalControl(data);
    if (!control.error.empty()) {
      ws_.Send(TerminalErrorFrame(Status(Code::kInvalidRequest, control.error)), false);
      return;
    }
    auto resized = io_->ProcessResize(id_, *control.resize);
    if (!resized.ok() && !ended_) ws_.Send(TerminalErrorFrame(resized.status()), false);
  }

  // Output to the client until the process ends, the client leaves or the
  // agent fails.
  void Pump(std::stop_token stop) {
    while (!stop.stop_requested()) {
      auto page =
          io_->ProcessOutput(id_, cursor_, kOutputWaitMs, static_cast<int>(kOutputWaitMs) + 30000);
      if (!page.ok()) {
        if (stop.stop_requested()) return;
        return Fail(page.status());
      }
      std::string bytes;
      for (const auto& c : page->chunks) bytes += c.data;
      cursor_ = page->next_cursor;
      if (!bytes.empty() && !ws_.Send(std::move(bytes), true)) return;
      if (page->complete) {
        ended_ = true;
        ws_.Send(TerminalExitFrame(page->process), false);
        ws_.Close(kCloseNormal, "exited");
        return;
      }
    }
  }

  void Fail(const Status& status) {
    ws_.Send(TerminalErrorFrame(status), false);
    ws_.Close(HttpStatus(status.code()) < 500 ? kClosePolicy : kCloseError,
              std::string(CodeName(status.code())));
  }

  ApiContext& ctx_;
  Exchange& ex_;
  WebSocket& ws_;
  std::optional<io::SandboxIo> io_;
  std::string id_;
  uint64_t cursor_ = 0;
  bool started_ = false;            // this session started the process
  std::atomic<bool> ended_{false};  // the process ended and all its output went out
};

}  // namespace

void AddTerminalRoutes(Router& r, ApiContext& ctx) {
  // A ticket that opens this sandbox's terminal once, for a browser, which
  // cannot put the key on a WebSocket (api/terminal_tickets.h).
  r.Add("POST", "/v1/sandboxes/{id}/terminal-tickets", [&ctx](Exchange& ex) {
    if (!ctx.tickets) throw ApiError(Code::kNotSupported, "terminal tickets are off");
    auto sandbox = FindSandbox(ctx, ex);
    FieldReader(ex.JsonBody(1024)).Finish();  // {} or nothing: no fields yet
    auto ticket =
        ValueOrThrow(ctx.tickets->Issue(CallerOf(ex).key_id, sandbox->id(), StableNowMs()));
    ex.SendJson(201, TerminalTicketJson(ticket, sandbox->id()));
  });
  r.Add("GET", "/v1/sandboxes/{id}/terminal", [&ctx](Exchange& ex) {
    if (!IsWebSocketUpgrade(ex.Header("Upgrade"), ex.Header("Connection")))
      throw ApiError(
          Code::kInvalidRequest,
          "the terminal is a WebSocket: send Upgrade: websocket and Connection: Upgrade");
    // The stream cap is checked before the upgrade: a 429 with Retry-After
    // the client can act on. A sandbox the caller cannot see is left to the
    // session, which reports it after the upgrade like its other errors.
    std::shared_ptr<void> stream_slot;
    auto s = ctx.sandboxes.Get(ex.params["id"]);
    auto scope = OwnerScope(ex);
    if (s && (!scope || s->spec().owner == *scope)) stream_slot = OpenStream(ctx, *s);
    std::unique_ptr<WebSocket> ws = ex.UpgradeToWebSocket();
    if (!ws) return;  // the handshake failed: there is no one to tell
    TerminalSession(ctx, ex, *ws).Run();
  });
}

}  // namespace kiln::api::v1
