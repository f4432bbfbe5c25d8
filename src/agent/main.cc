// kiln-agent: PID 1 inside every sandbox. Talks to kilnd over its stdio (two
// host FIFOs), runs commands as `user`, and reaps every orphan.
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "agent/agent.h"
#include "agent/event_loop.h"
#include "agent/home_alias.h"
#include "agent/sudo.h"
#include "common/unique_fd.h"

int main(int argc, char** argv) {
  // One binary, two roles: PID 1 of the sandbox, and /usr/bin/sudo in it.
  const char* base = std::strrchr(argv[0], '/');
  if (std::strcmp(base ? base + 1 : argv[0], "sudo") == 0) return kiln::agent::SudoMain(argc, argv);
  // `kiln-agent --wait-port PORT MS`: waits until something listens on
  // 127.0.0.1:PORT (an image's start command is ready); works in images
  // without a shell.
  if (argc == 4 && std::strcmp(argv[1], "--wait-port") == 0)
    return kiln::agent::WaitForPort(std::atoi(argv[2]), std::atoll(argv[3]));
  if (argc > 1 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("kiln-agent %s\n", KILN_VERSION);
    return 0;
  }
  // Read (and drop) KILN_RUN_AS before anything runs.
  kiln::agent::SetUpHomeAlias(kiln::agent::TheRunAs());
  // PID 1 must not die of a stray signal; commands get defaults back.
  for (int sig :
       {SIGPIPE, SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2, SIGTSTP, SIGTTIN, SIGTTOU})
    signal(sig, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  kiln::UniqueFd sfd(signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC));

  for (int fd : {0, 1}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  umask(022);

  kiln::agent::EventLoop loop;
  kiln::agent::Agent agent(loop);
  kiln::agent::SudoServer sudo(loop, agent.registry());
  sudo.Listen();
  loop.Add(sfd.get(), EPOLLIN, [&](uint32_t) {
    signalfd_siginfo info;
    while (::read(sfd.get(), &info, sizeof info) == sizeof info) {
    }
    agent.OnChildSignal();
  });
  loop.Run();
  return 0;
}
