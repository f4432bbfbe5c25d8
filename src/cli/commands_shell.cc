// kiln sandbox shell ID [-- CMD...]: an interactive terminal in a sandbox,
// over the daemon's terminal WebSocket (GET /v1/sandboxes/{id}/terminal).
//
// One io_context on this thread drives the WebSocket (one read and one write
// in flight, as Beast requires) and the signals (SIGWINCH: a resize frame;
// SIGINT/SIGTERM/SIGHUP: leave, restoring the terminal). Stdin is read by a
// thread of its own, because a blocking read works for any stdin (a tty, a
// pipe, a file) and epoll does not take regular files; it posts what it
// reads to the io_context.
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <cerrno>
#include <csignal>
#include <deque>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/output.h"
#include "cli/terminal_client.h"
#include "cli/ws_connect.h"

namespace kiln::cli {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;

namespace {

// The local terminal in raw mode for this object's life: keys (^C, ^Z, ^D
// among them) go to the remote terminal, which does its own line editing
// and echo. The destructor restores the saved mode on every way out.
class RawMode {
 public:
  explicit RawMode(int fd) : fd_(fd) {
    if (tcgetattr(fd_, &saved_) != 0) return;
    termios raw = saved_;
    cfmakeraw(&raw);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(fd_, TCSADRAIN, &raw) == 0;
  }
  ~RawMode() {
    if (active_) tcsetattr(fd_, TCSADRAIN, &saved_);
  }
  RawMode(const RawMode&) = delete;
  RawMode& operator=(const RawMode&) = delete;

 private:
  int fd_;
  termios saved_{};
  bool active_ = false;
};

// The window size of whichever of stdin, stdout is a terminal; 80x24 else.
std::pair<int, int> WindowSize() {
  for (int fd : {STDIN_FILENO, STDOUT_FILENO}) {
    winsize ws{};
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0)
      return {std::min<int>(ws.ws_col, 1000), std::min<int>(ws.ws_row, 1000)};
  }
  return {80, 24};
}

class ShellSession : public std::enable_shared_from_this<ShellSession> {
 public:
  explicit ShellSession(bool tty) : tty_(tty) {}

  // Connects and completes the handshake; throws the CLI's errors.
  void Connect(const ApiUrl& url, const std::optional<std::string>& key,
               const std::string& target) {
    ConnectWebSocket(ws_, url, key, target, "terminal");
  }

  // Runs until the terminal ends; the exit status for kiln.
  int Run() {
    auto [cols, rows] = WindowSize();
    last_size_ = {cols, rows};
    signals_.add(SIGWINCH);
    signals_.add(SIGINT);
    signals_.add(SIGTERM);
    signals_.add(SIGHUP);
    signals_.add(SIGQUIT);
    WaitSignal();
    Read();
    StartStdin();
    ioc_.run();
    if (exited_) return exit_status_;
    if (signal_ != 0) return 128 + signal_;
    if (error_.empty()) error_ = "the terminal connection ended before the shell did";
    return 1;
  }
  // Why it ended without an exit status ("" when it had one).
  const std::string& error() const { return error_; }

 private:
  void WaitSignal() {
    signals_.async_wait([this](beast::error_code ec, int sig) {
      if (ec) return;
      if (sig == SIGWINCH) {
        auto size = WindowSize();
        if (size != last_size_) {
          last_size_ = size;
          Queue(ResizeFrame(size.first, size.second), false);
        }
        return WaitSignal();
      }
      // Leaving on a signal: the daemon hangs the shell up when we close.
      signal_ = sig;
      Queue("", false, true);
    });
  }

  void Read() {
    ws_.async_read(in_, [this](beast::error_code ec, size_t) {
      if (ec) return Finish();
      std::string data = beast::buffers_to_string(in_.data());
      in_.consume(in_.size());
      if (ws_.got_binary()) {
        WriteAll(STDOUT_FILENO, data);  // stdout gone: the session still ends normally
      } else {
        TerminalEvent ev = ParseTerminalEvent(data);
        if (ev.kind == TerminalEvent::kExit) {
          exited_ = true;
          exit_status_ = ev.exit_status;
        } else if (ev.kind == TerminalEvent::kError) {
          error_ = ev.error_message + " (" + ev.error_code + ")";
        } else if (ev.kind == TerminalEvent::kReady) {
          auto [cols, rows] = WindowSize();
          // The window may have changed while the shell started.
          if (std::pair(cols, rows) != last_size_) {
            last_size_ = {cols, rows};
            Queue(ResizeFrame(cols, rows), false);
          }
        }
      }
      Read();
    });
  }

  // A thread reads stdin: see the file comment. It shares the session, so
  // a key typed while kiln exits lands in a queue that is never run.
  void StartStdin() {
    std::thread([self = shared_from_this(), tty = tty_] {
      net::io_context* ioc = &self->ioc_;
      char buf[16 * 1024];
      for (;;) {
        ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          // Piped input ended: ^D, the terminal's end of input (a tty in
          // raw mode never reads 0 bytes unless it went away).
          if (!tty) net::post(*ioc, [s = self.get()] { s->Queue("\x04", true); });
          return;
        }
        // Raw pointers in the handlers: they run only inside Run, while
        // the session lives; the thread's own reference keeps it for them.
        net::post(*ioc,
                  [s = self.get(), data = std::string(buf, static_cast<size_t>(n))]() mutable {
                    s->Queue(std::move(data), true);
                  });
      }
    }).detach();
  }

  void Queue(std::string data, bool binary, bool close = false) {
    if (done_) return;
    out_.push_back(Out{std::move(data), binary, close});
    Write();
  }

  void Write() {
    if (writing_ || out_.empty() || closing_) return;
    writing_ = true;
    if (out_.front().close) {
      closing_ = true;
      ws_.async_close(websocket::close_code::normal,
                      [this](beast::error_code) { writing_ = false; });
      return;
    }
    ws_.binary(out_.front().binary);
    ws_.async_write(net::buffer(out_.front().data), [this](beast::error_code ec, size_t) {
      writing_ = false;
      out_.pop_front();
      if (ec) return Finish();
      Write();
    });
  }

  // The connection ended: stop everything so run() returns.
  void Finish() {
    done_ = true;
    beast::error_code ec;
    signals_.cancel(ec);
    ws_.next_layer().close(ec);
    ioc_.stop();
  }

  struct Out {
    std::string data;
    bool binary;
    bool close;
  };

  net::io_context ioc_;
  bool tty_;
  websocket::stream<tcp::socket> ws_{ioc_};
  net::signal_set signals_{ioc_};
  beast::flat_buffer in_;
  std::deque<Out> out_;
  bool writing_ = false, closing_ = false, done_ = false;
  std::pair<int, int> last_size_;
  bool exited_ = false;
  int exit_status_ = 0;
  int signal_ = 0;
  std::string error_;
};

}  // namespace

int CmdSandboxShell(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const ApiUrl url = ctx.http().url();
  const std::optional<std::string> key =
      SelectApiKey(std::getenv("KILN_API_KEY"), std::getenv("RUNTIME_API_KEY"),
                   std::getenv("KILN_ADMIN_KEY_FILE"));
  auto [cols, rows] = WindowSize();
  const std::string target = TerminalTarget(url, id, cols, rows, args.command, args.Get("cwd"));
  const bool tty = isatty(STDIN_FILENO) == 1;
  // A closed stdout must end the session through its exit path (and the
  // terminal's restore), not kill kiln.
  std::signal(SIGPIPE, SIG_IGN);

  auto session = std::make_shared<ShellSession>(tty);
  session->Connect(url, key, target);
  int status;
  {
    std::optional<RawMode> raw;
    if (tty) raw.emplace(STDIN_FILENO);
    status = session->Run();
  }
  // Told once the terminal is back in its own mode.
  if (!session->error().empty()) std::fprintf(stderr, "kiln: %s\n", session->error().c_str());
  return status;
}

}  // namespace kiln::cli
