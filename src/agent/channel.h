// The agent's end of the agent channel: frames in on fd 0, frames out on
// fd 1 (the sandbox's stdio, which kilnd holds as two FIFOs).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "agent/event_loop.h"
#include "proto/frame.h"

namespace kiln::agent {

class Channel {
 public:
  class Handler {
   public:
    virtual ~Handler() = default;
    virtual void OnRequest(uint32_t stream, nlohmann::json request) = 0;
    virtual void OnData(uint32_t stream, uint8_t channel, std::string data, bool end) = 0;
    virtual void OnCancel(uint32_t stream) = 0;
    virtual void OnWindow(uint32_t stream, uint32_t bytes) = 0;
    // A daemon (re)connected: streams of the previous session are gone.
    virtual void OnNewSession() = 0;
  };

  Channel(EventLoop& loop, int in_fd, int out_fd, Handler& handler);

  void SendEvent(uint32_t stream, const nlohmann::json& event);
  void SendResponse(uint32_t stream, const nlohmann::json& response);
  void SendData(uint32_t stream, uint8_t channel, std::string_view data, bool end = false);
  void SendError(uint32_t stream, std::string_view code, std::string_view message);
  // Grants the daemon room for `bytes` more data on `stream` (flow control of
  // daemon -> agent data, used by egress connections).
  void SendWindow(uint32_t stream, uint32_t bytes);

  size_t queued_bytes() const { return out_.size() - out_offset_; }

 private:
  void OnReadable();
  void OnWritable();
  void Queue(std::string bytes);
  void HandleFrame(proto::Frame frame);
  void StartSession(const nlohmann::json& hello);

  EventLoop& loop_;
  int in_fd_;
  int out_fd_;
  Handler& handler_;
  proto::FrameDecoder decoder_{proto::kMaxDaemonPayload};
  proto::Reassembler requests_;
  std::string out_;
  size_t out_offset_ = 0;
  bool want_write_ = false;
};

}  // namespace kiln::agent
