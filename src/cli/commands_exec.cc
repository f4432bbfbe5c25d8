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
int execute(Context& ctx, const std::string& id, const json& body, ExecStreamPrinter& printer) {
  const RequestOptions options{
      .timeout = exec_http_timeout(body), .interruptible = true, .idempotent = false};
  const std::string target = sandbox_target(id, ":exec");
  if (bool_field(body, "stream")) {
    ctx.http().stream(Method::kPost, target, body, options,
                      [&printer](const json& event) { printer.on_event(event); });
    return printer.finish();
  }
  json result = ctx.http().call(Method::kPost, target, &body, options);
  print_json(result);
  return exit_code_for(result);
}

std::optional<std::string> read_stdin_file(const ParsedArgs& args) {
  auto path = args.get("stdin-file");
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
void signal_process_quietly(Context& ctx, const std::string& id, const std::string& pid) {
  try {
    const json body = {{"signal", "SIGTERM"}};
    ctx.http().call(Method::kPost,
                    sandbox_target(id, "/processes/" + percent_encode(pid) + ":signal"), &body,
                    RequestOptions{.timeout = 10s});
  } catch (const std::exception&) {
  }
}

}  // namespace

int cmd_sandbox_run(Context& ctx, const ParsedArgs& args) {
  // Build both requests first: a bad flag must fail before anything is created.
  const json create = sandbox_create_body(args);
  const int wait = wait_seconds(args);
  json exec = exec_body(args, args.command, /*stream=*/!ctx.json(), std::nullopt);
  exec.erase("env");  // run's --env is a create option: it sets the sandbox's env

  install_interrupt_handlers();
  // Cleared before the command's output starts (or any message).
  Progress progress("creating sandbox", ctx.progress());
  // Not interruptible: cutting it short could leave a sandbox we know no id for.
  json info = create_sandbox(ctx, create, wait);
  const std::string id = string_field(info, "id");

  ExecStreamPrinter printer(STDOUT_FILENO, STDERR_FILENO);
  int status = 0;
  try {
    if (interrupt_requested()) throw Interrupted(interrupt_signal());
    wait_until_running(ctx, std::move(info), /*interruptible=*/true);
    progress.done();
    status = execute(ctx, id, exec, printer);
  } catch (const Interrupted& e) {
    progress.done();
    if (!ctx.json() && e.signal != SIGPIPE) {
      write_all(STDERR_FILENO, "kiln: interrupted; stopping sandbox " + id + "\n");
    }
    stop_sandbox_quietly(ctx, id);
    return 128 + e.signal;
  } catch (...) {
    progress.done();
    stop_sandbox_quietly(ctx, id);
    throw;
  }
  stop_sandbox_quietly(ctx, id);
  return status;
}

int cmd_sandbox_exec(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json body = exec_body(args, args.command, /*stream=*/!ctx.json(), read_stdin_file(args));

  install_interrupt_handlers();
  ExecStreamPrinter printer(STDOUT_FILENO, STDERR_FILENO);
  try {
    return execute(ctx, id, body, printer);
  } catch (const Interrupted& e) {
    if (printer.process_id()) signal_process_quietly(ctx, id, *printer.process_id());
    return 128 + e.signal;
  }
}

}  // namespace kiln::cli
