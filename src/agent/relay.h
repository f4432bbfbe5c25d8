// One TCP connection inside the sandbox carried on a stream of the agent's
// channel: data 0 from kilnd is written to the socket, what the socket
// sends goes out as data 1, each way under a window (kilnd credits what it
// consumed; the agent credits what it wrote), so neither side buffers more
// than proto::kStreamWindow for a slow peer. The egress proxy's accepted
// connections and the ports kilnd dials in (port.dial) are both this.
#pragma once

#include <cstdint>
#include <string>

#include "agent/agent.h"
#include "common/unique_fd.h"

namespace kiln::agent {

class RelayStream : public Stream {
 public:
  // `connecting`: `fd` is a non-blocking connect under way; the relay starts
  // once it completes (event PortOpened), and a failed one answers the
  // error port_closed.
  RelayStream(Agent& agent, uint32_t stream, UniqueFd fd, bool connecting = false);
  ~RelayStream() override;

  void OnData(uint8_t channel, std::string data, bool end) override;
  void OnWindow(uint32_t bytes) override;

 private:
  void OnEvents(uint32_t ev);
  void Connected();
  void Read();
  void Flush();
  void UpdateInterest();
  void MaybeEnd();
  void End(const char* how);

  Agent& agent_;
  uint32_t stream_;
  UniqueFd fd_;
  std::string out_;
  size_t offset_ = 0;
  size_t uncredited_ = 0;
  uint64_t unacked_ = 0;
  uint32_t interest_ = 0;
  EventLoop::TimerId flush_timer_ = 0;
  EventLoop::TimerId connect_timer_ = 0;
  bool connecting_;
  bool read_ended_ = false, peer_ended_ = false, write_shut_ = false, done_ = false;
};

// op "port.dial": connects to 127.0.0.1:port (then [::1]:port) and relays it.
void DialPort(Agent& agent, uint32_t stream, int port);

}  // namespace kiln::agent
