#include "proto/signals.h"

#include <csignal>
#include <utility>

namespace kiln::proto {
namespace {

constexpr std::pair<int, std::string_view> kSignals[] = {
    {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
    {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
    {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGCHLD, "SIGCHLD"},
    {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"}, {SIGXCPU, "SIGXCPU"},
    {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
};

}  // namespace

std::string SignalName(int sig) {
  for (const auto& [n, name] : kSignals) {
    if (n == sig) return std::string(name);
  }
  return "SIG" + std::to_string(sig);
}

int SignalNumber(std::string_view name) {
  for (const auto& [n, s] : kSignals) {
    if (s == name) return n;
  }
  return 0;
}

}  // namespace kiln::proto
