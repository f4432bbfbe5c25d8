// The sandbox's only way out: an HTTP proxy address on 127.0.0.1 whose
// connections kilnd carries (or refuses) on the host.
//
// The agent neither parses nor judges anything here. It accepts a
// connection, tells kilnd about it on the listen stream, and once kilnd
// attaches a stream to it, moves bytes both ways under a window in each
// direction. kilnd reads the proxy request, applies the sandbox's policy and
// answers it, so a sandbox that subverts its agent gains nothing.
#pragma once

#include <cstdint>
#include <map>

#include "agent/agent.h"
#include "common/unique_fd.h"

namespace kiln::agent {

constexpr uint16_t kEgressPort = 10800;
// The environment every command gets, so common clients use the proxy.
extern const char* const kEgressEnv[5];

class Egress {
 public:
  explicit Egress(Agent& agent);
  ~Egress();

  // Binds 127.0.0.1:kEgressPort. Called once at boot: a restored copy keeps
  // the listening socket.
  void Listen();
  // op "egress.listen": events {"conn": N} announce accepted connections on
  // `stream` until it is cancelled or the session ends.
  void HandleListen(uint32_t stream);
  // op "egress.attach": `stream` carries connection N's bytes (channel 1 from
  // the sandbox, channel 0 to it) and answers when both directions ended.
  void HandleAttach(uint32_t stream, uint64_t conn);
  // The daemon changed: connections announced to the old one are refused.
  void OnNewSession();

 private:
  friend class EgressListenStream;
  void OnAccept();

  struct Pending {
    UniqueFd fd;
    EventLoop::TimerId timer = 0;
  };

  Agent& agent_;
  UniqueFd listener_;
  uint32_t listen_stream_ = 0;  // 0 = no daemon listening
  uint64_t next_conn_ = 1;
  std::map<uint64_t, Pending> pending_;  // accepted, not attached yet
};

}  // namespace kiln::agent
