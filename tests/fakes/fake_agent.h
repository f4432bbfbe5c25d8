// Test-only: an agent channel carried in-process, for testing the control
// plane and the egress gate without a sandbox (see docs/guide.md, "Testing
// the core without root").
//
// kilnd's side is the engine::AgentChannel / AgentStream interface; the
// agent's side of each operation is a FakeAgentOp, which a handler (or the
// test itself) uses to answer: events, data, a response. By default the
// channel answers {"op":"ping"} as the real agent does; other operations
// either go to a handler the test installed or wait, unanswered, for the
// test to pick them up with WaitOp().
//
// What it does not model: framing, fragment limits, the FIFOs' buffering,
// timing of a real agent, or the session resync after a daemon restart.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/agent_channel.h"

namespace kiln::fakes {

// The operation a request names ("ping", "egress.listen"), "" if none. The
// one place the fakes decode a request, so that it can follow the typed
// requests of src/proto/ops.h when they land.
std::string OpName(const nlohmann::json& request);

// The agent's end of one operation. Thread-safe.
class FakeAgentOp {
 public:
  using Message = engine::AgentStream::Message;
  // What kilnd sent to the agent (SendData / SendDataWindowed).
  struct Input {
    uint8_t channel = 0;
    std::string data;
    bool end = false;
  };

  explicit FakeAgentOp(nlohmann::json request);

  const nlohmann::json& request() const { return request_; }
  const std::string& name() const { return name_; }

  // Agent -> kilnd. False (and nothing sent) once the operation is over:
  // answered, cancelled by kilnd, or its channel gone.
  bool Event(nlohmann::json body);
  bool Data(uint8_t channel, std::string data, bool end = false);
  bool Respond(nlohmann::json body);  // the operation's last message

  // kilnd -> agent: the next input, consuming it (which grants kilnd that
  // much more window, as the agent does when it has written it out). False
  // after timeout_ms, or at once when the operation is over and nothing is
  // left to read.
  bool NextInput(Input* in, int timeout_ms);
  // Inputs concatenated until one with `end`, the operation's end or the
  // timeout.
  std::string ReadUntilEnd(int timeout_ms);

  bool over() const;       // answered, cancelled or channel gone
  bool cancelled() const;  // kilnd cancelled it (AgentStream::Cancel or dropped unanswered)
  // Waits until over(); false after timeout_ms.
  bool WaitOver(int timeout_ms);
  uint64_t acked() const;  // bytes kilnd acknowledged (AgentStream::Ack)

 private:
  friend class FakeAgentChannel;
  friend class FakeStream;

  // kilnd's side, through FakeStream.
  bool NextForKilnd(Message* m, int timeout_ms);
  bool SendFromKilnd(uint8_t channel, std::string_view data, bool end, bool windowed);
  void AckFromKilnd(uint32_t bytes);
  void CancelFromKilnd();
  // The channel ended (the sandbox died or kilnd closed it).
  void ChannelGone();
  bool PushLocked(Message m);

  const nlohmann::json request_;
  const std::string name_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Message> to_kilnd_;
  std::deque<Input> to_agent_;
  bool over_ = false;  // a response or kClosed is queued for kilnd
  bool cancelled_ = false;
  bool channel_gone_ = false;
  uint64_t credit_;  // bytes SendDataWindowed may still send
  uint64_t acked_ = 0;
};

// Thread-safe.
class FakeAgentChannel : public engine::AgentChannel {
 public:
  using Handler = std::function<void(const std::shared_ptr<FakeAgentOp>&)>;

  // Answers {"op":"ping"} with {"ok":true,"time":<now ms>}.
  FakeAgentChannel();
  ~FakeAgentChannel() override;

  // engine::AgentChannel
  std::unique_ptr<engine::AgentStream> Start(const nlohmann::json& request) override;
  bool alive() const override;
  // As the real channel: registered after the channel ended, it is never called.
  void OnClose(std::function<void()> cb) override;
  // kilnd hangs up: pending and later operations end with kClosed and the
  // OnClose callback runs once (on the caller's thread).
  void Close() override;

  // The sandbox died: as Close(), seen from the other side.
  void Die();

  // Runs `handler` (on the thread that called Start) for every later
  // operation named `op`; null removes it: such operations then stay open,
  // unanswered, until a test takes them with WaitOp(). Handle("ping",
  // nullptr) makes an agent that no longer answers.
  void Handle(const std::string& op, Handler handler);
  // The oldest operation named `op` that no handler took and no earlier
  // WaitOp returned; null after timeout_ms.
  std::shared_ptr<FakeAgentOp> WaitOp(const std::string& op, int timeout_ms);

  // Requests delivered so far (not those started on a dead channel).
  std::vector<nlohmann::json> requests() const;
  int Count(const std::string& op) const;
  int on_close_calls() const;
  bool closed_by_kilnd() const;

 private:
  void End(bool by_kilnd);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool alive_ = true;
  bool closed_by_kilnd_ = false;
  int on_close_calls_ = 0;
  std::function<void()> on_close_;
  std::map<std::string, Handler> handlers_;
  std::vector<std::weak_ptr<FakeAgentOp>> open_;
  std::deque<std::shared_ptr<FakeAgentOp>> unclaimed_;
  std::vector<nlohmann::json> requests_;
};

}  // namespace kiln::fakes
