// The channel to one sandbox's agent, as the rest of kilnd sees it: many
// operations at once, each a stream of messages. AgentConnection carries it
// over the sandbox's FIFOs; tests/fakes carries it in-process, so that the
// control plane and the API can be tested without a sandbox.
//
// Nothing outside src/engine builds requests for it: engine::AgentClient
// turns the typed operations of src/proto/ops.h into requests and back.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln::engine {

// One operation in flight. Thread-compatible: one user at a time, though
// Cancel() may come from any thread.
class AgentStream {
 public:
  struct Message {
    enum Kind { kData, kEvent, kResponse, kClosed } kind = kClosed;
    uint8_t channel = 0;
    bool end = false;
    std::string data;     // kData
    nlohmann::json body;  // kEvent, kResponse
  };

  virtual ~AgentStream() = default;  // cancels the operation if it has not answered

  // Waits for the next message; false after timeout_ms (-1 = forever).
  // kClosed: the operation was cancelled or the channel is gone.
  virtual bool Next(Message* m, int timeout_ms = -1) = 0;
  // Sends input (stdin, file content). False if the channel is gone.
  virtual bool SendData(uint8_t channel, std::string_view data, bool end) = 0;
  // Like SendData, but never more than the agent's window ahead of what it
  // has consumed: blocks while the window is full, up to a deadline (then
  // the op is cancelled). For ops whose agent side announces its window
  // (egress, port connections). False once the op answered, was cancelled,
  // waited past the deadline or the channel is gone.
  virtual bool SendDataWindowed(uint8_t channel, std::string_view data, bool end) = 0;
  // Grants the agent room for `bytes` more of output (flow control).
  virtual void Ack(uint32_t bytes) = 0;
  // Tells the agent to stop the operation; a waiting Next() then yields kClosed.
  virtual void Cancel() = 0;
};

// Thread-safe.
class AgentChannel {
 public:
  virtual ~AgentChannel() = default;

  // Opens an operation with an encoded request. Never null: on a dead
  // channel the stream's first message is kClosed.
  virtual std::unique_ptr<AgentStream> Start(const nlohmann::json& request) = 0;
  virtual bool alive() const = 0;
  // Called once, on the channel's own thread, when the channel ends (the
  // sandbox died or was destroyed, or its agent broke the protocol).
  virtual void OnClose(std::function<void()> cb) = 0;
  virtual void Close() = 0;
  // Ends the channel from kiln's side, now: a write waiting for the agent
  // fails at once and every operation gets kClosed. A stop calls it first,
  // so that nothing of the stop waits on an agent that stopped reading.
  virtual void Abort() {}
  // Why the channel ended, once it has: "" when the sandbox closed it (it
  // died or was destroyed); else kiln's reason for giving up on its agent
  // (agent_protocol_error, agent_unresponsive), which stops the sandbox.
  virtual std::string close_reason() const { return ""; }
};

// A whole request/response exchange: the answer, or {"error": {...}} with
// agent_timeout after timeout_ms or not_running if the channel ends.
nlohmann::json RoundTrip(AgentChannel& channel, const nlohmann::json& request, int timeout_ms);

}  // namespace kiln::engine
