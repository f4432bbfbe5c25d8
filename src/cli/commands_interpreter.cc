// kiln sandbox run-code ID FILE|-: one cell in the sandbox's interpreter
// (POST /v1/sandboxes/{id}/interpreter:run, stream: true), its output
// printed as it comes.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/exit_status.h"
#include "cli/interrupt.h"
#include "cli/json_util.h"
#include "cli/output.h"
#include "cli/url.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr std::size_t kMaxCode = 8u << 20;  // the daemon's JSON body cap

std::string ReadCode(const std::string& path) {
  const bool use_stdin = path == "-";
  int fd = use_stdin ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UsageError("cannot open " + path + ": " + std::strerror(errno));
  std::string code;
  char buf[64 * 1024];
  std::string failure;
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) failure = "cannot read " + path + ": " + std::strerror(errno);
    if (n <= 0) break;
    code.append(buf, static_cast<std::size_t>(n));
    if (code.size() > kMaxCode) {
      failure = path + " holds more than 8 MiB of code";
      break;
    }
  }
  if (!use_stdin) ::close(fd);
  if (!failure.empty()) throw UsageError(failure);
  return code;
}

// The main result's text/plain, else what the bundle has that reads as text.
std::string ResultText(const json& result) {
  const json data = result.value("data", json::object());
  if (!data.is_object()) return "";
  for (const char* mime : {"text/plain", "text/markdown", "application/json"}) {
    auto it = data.find(mime);
    if (it == data.end()) continue;
    return it->is_string() ? it->get<std::string>() : it->dump();
  }
  if (!data.empty()) return "[" + data.begin().key() + "]";
  return "";
}

}  // namespace

int CmdSandboxRunCode(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  json body = {{"code", ReadCode(args.positionals.at(1))}, {"stream", true}};
  if (auto lang = args.Get("lang")) body["language"] = *lang;
  if (auto c = args.Get("context")) body["context"] = *c;
  std::int64_t timeout_ms = 60000;
  if (auto t = args.Get("timeout-ms")) {
    timeout_ms = ParseInt("--timeout-ms", *t, 0, 86400000);
    body["timeoutMs"] = timeout_ms;
  }
  InstallInterruptHandlers();
  const RequestOptions options{
      .timeout = std::chrono::milliseconds(timeout_ms == 0 ? 86400000 : timeout_ms) + 60s,
      .interruptible = true,
      .idempotent = false};
  json execution;
  try {
    ctx.http().Stream(
        Method::kPost, SandboxTarget(id, "/interpreter:run"), body, options, [&](const json& ev) {
          if (ctx.json()) PrintJson(ev);
          const std::string k = StringField(ev, "k");
          if (k == "execution") {
            execution = ev.value("execution", json::object());
          } else if (k == "failure") {
            throw ClientError(StringField(ev, "code"), StringField(ev, "message"));
          } else if (ctx.json()) {
            return;
          } else if (k == "stdout") {
            WriteAll(STDOUT_FILENO, StringField(ev, "text"));
          } else if (k == "stderr") {
            WriteAll(STDERR_FILENO, StringField(ev, "text"));
          } else if (k == "result") {
            std::string text = ResultText(ev);
            if (!text.empty()) WriteAll(STDOUT_FILENO, text + "\n");
          } else if (k == "error") {
            std::string tb = StringField(ev, "traceback");
            WriteAll(STDERR_FILENO,
                     tb.empty() ? StringField(ev, "name") + ": " + StringField(ev, "value") + "\n"
                                : tb + (tb.back() == '\n' ? "" : "\n"));
          }
        });
  } catch (const Interrupted& e) {
    return 128 + e.signal;  // leaving interrupts the run (the daemon sees the client go)
  }
  if (!execution.is_object())
    throw ClientError("stream_ended", "the interpreter stream ended without its execution");
  const std::string status = StringField(execution, "status");
  if (status == "ok") return 0;
  if (status == "timeout") return kExitTimedOut;
  if (status != "error" && !ctx.json())
    std::fprintf(stderr, "kiln: the run ended: %s\n", status.c_str());
  return 1;
}

}  // namespace kiln::cli
