#include "cli/interrupt.h"

#include <csignal>
#include <initializer_list>

namespace kiln::cli {
namespace {

volatile std::sig_atomic_t g_signal = 0;

void record_signal(int sig) {
  if (g_signal == 0) g_signal = sig;
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = record_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;  // no SA_RESTART needed: Asio retries EINTR itself
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

bool interrupt_requested() { return g_signal != 0; }

int interrupt_signal() { return g_signal; }

void clear_interrupt() { g_signal = 0; }

}  // namespace kiln::cli
