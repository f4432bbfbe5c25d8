// A command's output after its exit, when the agent's loop falls behind.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "agent/command.h"
#include "common/unique_fd.h"

namespace kiln::agent {
namespace {

// The loop takes 64 events a turn. With more than 64 descriptors ready
// ahead of the command's pipe and one turn that stalls past the drain's
// 2 s (64 execs ending at once on a loaded host), the drain ends before
// the pipe's turn comes: what the program wrote must still arrive.
TEST(CommandDrain, OutputWrittenBeforeTheExitSurvivesAStalledLoop) {
  EventLoop loop;
  CommandRegistry registry(loop);
  std::vector<UniqueFd> busy;
  bool stalled = false;
  for (int i = 0; i < 64; ++i) {
    busy.emplace_back(::eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK));  // ready until read
    ASSERT_TRUE(busy.back().valid());
    loop.Add(busy.back().get(), EPOLLIN, [&stalled](uint32_t) {
      if (stalled) return;
      stalled = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2300));
    });
  }
  std::string out;
  bool done = false;
  Command::Callbacks cb;
  cb.on_output = [&](uint8_t channel, std::string_view d) {
    if (channel == 1) out.append(d);
  };
  cb.on_done = [&](const CommandResult&) {
    done = true;
    loop.Stop();
  };
  SpawnSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo job-7"};
  spec.env = {"PATH=/usr/bin:/bin"};
  SpawnResult err;
  auto command = Command::Start(loop, registry, spec, "t-drain", {}, cb, &err);
  ASSERT_TRUE(command) << err.what;
  // Exited, its line in the pipe; the loop learns of the exit first.
  for (int i = 0; i < 500; ++i) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(command->pid()), &info, WEXITED | WNOHANG | WNOWAIT) ==
            0 &&
        info.si_pid == command->pid())
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  registry.ReapAll();
  ASSERT_FALSE(command->running());
  loop.AddTimer(10000, [&loop] { loop.Stop(); });
  loop.Run();
  EXPECT_TRUE(stalled) << "the loop never stalled: the test proved nothing";
  EXPECT_TRUE(done);
  EXPECT_EQ(out, "job-7\n");
}

}  // namespace
}  // namespace kiln::agent
