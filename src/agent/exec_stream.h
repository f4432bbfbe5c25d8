// One exec (or tar transfer) running for the daemon: forwards output as
// data frames under a flow-control window, feeds stdin from data frames,
// enforces the timeout and answers the exit.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "agent/agent.h"

namespace kiln::agent {

struct ExecOptions {
  bool stdin_data = false;     // the daemon sends stdin as data frames
  int64_t timeout_ms = 60000;  // 0 = none
  uint64_t capture_limit = 0;  // forward at most this much per channel (0 = all)
  // Kill the command (and all it started) once a channel passes
  // capture_limit, instead of reading and dropping the rest.
  bool kill_past_limit = false;
};

class ExecStream : public Stream {
 public:
  // Starts the command; always answers on `stream` eventually.
  static void Start(Agent& agent, uint32_t stream, SpawnSpec spec, ExecOptions options,
                    nlohmann::json extra_response = nlohmann::json::object());

  void OnData(uint8_t channel, std::string data, bool end) override;
  void OnWindow(uint32_t bytes) override;

 private:
  ExecStream(Agent& agent, uint32_t stream) : agent_(agent), stream_(stream) {}
  void OnOutput(uint8_t channel, std::string_view data);
  void OnDone(const CommandResult& result);

  Agent& agent_;
  uint32_t stream_;
  ExecOptions options_;
  nlohmann::json extra_;
  std::unique_ptr<Command> command_;
  uint64_t bytes_[3] = {0, 0, 0};
  uint64_t unacked_ = 0;
  bool killed_past_limit_ = false;
  EventLoop::TimerId timer_ = 0;
};

}  // namespace kiln::agent
