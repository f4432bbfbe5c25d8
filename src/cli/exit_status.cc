#include "cli/exit_status.h"

#include <charconv>
#include <csignal>
#include <utility>

#include "cli/json_util.h"

namespace kiln::cli {
namespace {

// The daemon names signals; Linux numbers them. Listed rather than parsed
// from strsignal() so the mapping does not depend on the C library.
constexpr std::pair<std::string_view, int> kSignals[] = {
    {"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"ILL", SIGILL},
    {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"BUS", SIGBUS},     {"FPE", SIGFPE},
    {"KILL", SIGKILL},     {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},   {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},   {"CHLD", SIGCHLD},
    {"CONT", SIGCONT},     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ},
    {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
    {"PWR", SIGPWR},       {"SYS", SIGSYS},
};

}  // namespace

int SignalNumber(std::string_view name) {
  int n = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), n);
  if (!name.empty() && ec == std::errc() && end == name.data() + name.size()) {
    return n > 0 && n < 65 ? n : 0;
  }
  if (name.starts_with("SIG")) name.remove_prefix(3);
  for (const auto& [sig_name, number] : kSignals) {
    if (sig_name == name) return number;
  }
  return 0;
}

int ExitCodeFor(const nlohmann::json& result) {
  if (!result.is_object()) return 1;
  const std::string state = StringField(result, "state");
  if (BoolField(result, "timedOut") || state == "timed_out") {
    return kExitTimedOut;
  }
  if (auto code = IntField(result, "exitCode")) return static_cast<int>(*code & 0xFF);
  if (int n = SignalNumber(StringField(result, "signal")); n > 0) return 128 + n;
  if (state == "killed") return 128 + SIGKILL;
  return 1;
}

}  // namespace kiln::cli
