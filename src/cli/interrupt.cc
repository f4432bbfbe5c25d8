#include "cli/interrupt.h"

#include <csignal>
#include <initializer_list>

namespace kiln::cli {
namespace {

volatile std::sig_atomic_t g_signal = 0;

void RecordSignal(int sig) {
  if (g_signal == 0) g_signal = sig;
}

}  // namespace

void InstallInterruptHandlers() {
  struct sigaction sa {};
  sa.sa_handler = RecordSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;  // no SA_RESTART needed: Asio retries EINTR itself
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

bool InterruptRequested() { return g_signal != 0; }

int InterruptSignal() { return g_signal; }

void ClearInterrupt() { g_signal = 0; }

}  // namespace kiln::cli
