// Signal names (src/proto/signals.h).
#include <gtest/gtest.h>

#include <csignal>

#include "proto/signals.h"

namespace kiln::proto {
namespace signals_test {
namespace {

TEST(SignalsTest, NamesCommonSignals) {
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGINT), "SIGINT");
  EXPECT_EQ(SignalName(SIGHUP), "SIGHUP");
  EXPECT_EQ(SignalName(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(SignalName(SIGSTOP), "SIGSTOP");
  EXPECT_EQ(SignalName(SIGCONT), "SIGCONT");
  EXPECT_EQ(SignalName(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(SignalName(SIGUSR2), "SIGUSR2");
  EXPECT_EQ(SignalName(SIGPIPE), "SIGPIPE");
  EXPECT_EQ(SignalName(SIGCHLD), "SIGCHLD");
}

TEST(SignalsTest, LinuxNumbers) {
  // The API documents Linux numbering.
  EXPECT_EQ(SignalName(9), "SIGKILL");
  EXPECT_EQ(SignalName(15), "SIGTERM");
  EXPECT_EQ(SignalNumber("SIGKILL"), 9);
  EXPECT_EQ(SignalNumber("SIGTERM"), 15);
  EXPECT_EQ(SignalNumber("SIGINT"), 2);
  EXPECT_EQ(SignalNumber("SIGHUP"), 1);
}

TEST(SignalsTest, UnnamedNumbersGetSigN) {
  EXPECT_EQ(SignalName(0), "SIG0");
  EXPECT_EQ(SignalName(SIGRTMIN), "SIG" + std::to_string(SIGRTMIN));
  EXPECT_EQ(SignalName(64), "SIG64");
  EXPECT_EQ(SignalName(-3), "SIG-3");
}

TEST(SignalsTest, NameNumberRoundTripForAllNamedSignals) {
  int named = 0;
  for (int sig = 1; sig < 65; ++sig) {
    std::string name = SignalName(sig);
    int back = SignalNumber(name);
    if (back == 0) {
      EXPECT_EQ(name, "SIG" + std::to_string(sig));
      continue;
    }
    ++named;
    EXPECT_EQ(back, sig) << name;
  }
  EXPECT_GE(named, 20);
}

TEST(SignalsTest, UnknownNamesAreZero) {
  EXPECT_EQ(SignalNumber(""), 0);
  EXPECT_EQ(SignalNumber("KILL"), 0);     // prefix required
  EXPECT_EQ(SignalNumber("sigkill"), 0);  // case-sensitive
  EXPECT_EQ(SignalNumber("SIGKILL "), 0);
  EXPECT_EQ(SignalNumber("SIGFOO"), 0);
  EXPECT_EQ(SignalNumber("9"), 0);
  EXPECT_EQ(SignalNumber("SIG9"), 0);
}

}  // namespace
}  // namespace signals_test
}  // namespace kiln::proto
