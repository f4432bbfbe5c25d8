// kiln sandbox run | exec: run a command, mirror its output and exit status.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/exec_stream.h"
#include "cli/exit_status.h"
#include "cli/interrupt.h"
#include "cli/json_util.h"
#include "cli/output.h"
#include "cli/progress.h"
#include "cli/requests.h"
#include "cli/url.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// Streams (or, with --json, collects) one exec; returns kiln's exit status.
int Execute(Context& ctx, const std::string& id, const json& body, ExecStreamPrinter& printer) {
  const RequestOptions options{
      .timeout = ExecHttpTimeout(body), .interruptible = true, .idempotent = false};
  const std::string target = SandboxTarget(id, ":exec");
  if (BoolField(body, "stream")) {
    ctx.http().Stream(Method::kPost, target, body, options,
                      [&printer](const json& event) { printer.OnEvent(event); });
    return printer.Finish();
  }
  json result = ctx.http().Call(Method::kPost, target, &body, options);
  PrintJson(result);
  return ExitCodeFor(result);
}

std::optional<std::string> ReadStdinFile(const ParsedArgs& args) {
  auto path = args.Get("stdin-file");
  if (!path) return std::nullopt;
  const bool use_stdin = *path == "-";
  int fd = use_stdin ? STDIN_FILENO : ::open(path->c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UsageError("cannot open --stdin-file " + *path + ": " + std::strerror(errno));
  std::string data;
  char buf[64 * 1024];
  std::string failure;
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      failure = "cannot read --stdin-file " + *path + ": " + std::strerror(errno);
      break;
    }
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
    if (data.size() > kMaxStdinBytes) {
      failure = "--stdin-file " + *path + " holds more than 12 MiB, the most an exec takes";
      break;
    }
  }
  if (!use_stdin) ::close(fd);
  if (!failure.empty()) throw UsageError(failure);
  return data;
}

// Best effort: the exec's connection is already gone, this asks the
// process to end the way a terminal's Ctrl-C would. Unknown pid → ignored.
void SignalProcessQuietly(Context& ctx, const std::string& id, const std::string& pid) {
  try {
    const json body = {{"signal", "SIGTERM"}};
    ctx.http().Call(Method::kPost,
                    SandboxTarget(id, "/processes/" + PercentEncode(pid) + ":signal"), &body,
                    RequestOptions{.timeout = 10s});
  } catch (const std::exception&) {
  }
}

}  // namespace

int CmdSandboxRun(Context& ctx, const ParsedArgs& args) {
  // Build both requests first: a bad flag must fail before anything is created.
  json create = SandboxCreateBody(args);
  create.erase("timeoutSeconds");  // run's --timeout is the command's (ExecBody), not the lease
  const int wait = WaitSeconds(args);
  json exec = ExecBody(args, args.command, /*stream=*/!ctx.json(), std::nullopt);
  exec.erase("env");  // run's --env is a create option: it sets the sandbox's env

  InstallInterruptHandlers();
  // Cleared before the command's output starts (or any message).
  Progress progress("creating sandbox", ctx.progress());
  // Not interruptible: cutting it short could leave a sandbox we know no id for.
  json info = CreateSandbox(ctx, create, wait);
  const std::string id = StringField(info, "id");

  ExecStreamPrinter printer(STDOUT_FILENO, STDERR_FILENO);
  int status = 0;
  try {
    if (InterruptRequested()) throw Interrupted(InterruptSignal());
    WaitUntilRunning(ctx, std::move(info), /*interruptible=*/true);
    progress.Done();
    status = Execute(ctx, id, exec, printer);
  } catch (const Interrupted& e) {
    progress.Done();
    if (!ctx.json() && e.signal != SIGPIPE) {
      WriteAll(STDERR_FILENO, "kiln: interrupted; stopping sandbox " + id + "\n");
    }
    StopSandboxQuietly(ctx, id);
    return 128 + e.signal;
  } catch (...) {
    progress.Done();
    StopSandboxQuietly(ctx, id);
    throw;
  }
  StopSandboxQuietly(ctx, id);
  return status;
}

int CmdSandboxExec(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json body = ExecBody(args, args.command, /*stream=*/!ctx.json(), ReadStdinFile(args));

  InstallInterruptHandlers();
  ExecStreamPrinter printer(STDOUT_FILENO, STDERR_FILENO);
  try {
    return Execute(ctx, id, body, printer);
  } catch (const Interrupted& e) {
    if (printer.process_id()) SignalProcessQuietly(ctx, id, *printer.process_id());
    return 128 + e.signal;
  }
}

}  // namespace kiln::cli
