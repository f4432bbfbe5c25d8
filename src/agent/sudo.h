// Passwordless sudo without setuid.
//
// gVisor (20240729) sets no_new_privs on every process, so a setuid sudo can
// never gain root. Instead /usr/bin/sudo is the agent binary itself: as
// `sudo` it connects to the agent's root-only-writable socket, hands over
// its stdin/stdout/stderr (SCM_RIGHTS), argv, cwd and environment, and the
// agent runs the command as root. The client exits as the command did.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "agent/event_loop.h"
#include "common/unique_fd.h"

namespace kiln::agent {

class CommandRegistry;

constexpr const char* kSudoSocket = "/run/kiln/sudo.sock";

// Whether the shim serves requests (create field `sudo`; on by default).
// Off, every request is refused: root-owned, 0500 files (a grader) are
// then out of the sandbox user's reach.
void SetSudoAllowed(bool allowed);
bool SudoAllowed();

class SudoServer {
 public:
  SudoServer(EventLoop& loop, CommandRegistry& registry);
  ~SudoServer();
  // Creates the socket; false if it cannot.
  bool Listen();

 private:
  struct Client;
  struct Pending;
  // At most this many requests arriving at once, each within kRequestMs.
  static constexpr size_t kMaxPending = 64;
  static constexpr int64_t kRequestMs = 2000;

  void OnAccept();
  void OnReadable(int fd);
  void DropPending(int fd);
  void Run(Pending request);
  void OnClientHangup(int fd);

  EventLoop& loop_;
  CommandRegistry& registry_;
  UniqueFd listener_;
  std::map<int, std::unique_ptr<Pending>> pending_;  // by connection fd
  std::map<int, std::unique_ptr<Client>> clients_;   // by connection fd
};

// `sudo [options] [--] command...` as run by a user: returns its exit code.
int SudoMain(int argc, char** argv);

}  // namespace kiln::agent
