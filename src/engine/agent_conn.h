// kilnd's end of one sandbox's agent channel: two FIFOs in the sandbox's
// host directory (agent.in, agent.out) that the sandbox holds as its stdio.
// Because they are named, a restarted kilnd can open them again and resume
// with a new session (hello + sync marker).
//
// Many operations run at once: each is a stream with its own queue of
// messages, filled by one reader thread.
//
// The agent is PID 1 of a sandbox whose policy may be root, and root can
// stop, replace or impersonate it. So nothing the agent does may hold or
// grow kilnd: every write to it has a deadline (kWriteDeadlineMs), and what
// it sends is capped -- one message, all half-received messages, what waits
// in one operation's queue, output past its flow-control window, nesting in
// its JSON. An agent that breaks any of these loses its channel, with a
// log line and close_reason() saying why, and the control plane stops its
// sandbox; kilnd goes on.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "common/unique_fd.h"
#include "engine/agent_channel.h"

namespace kiln::engine {

class AgentConnection;

// One operation in flight on the channel.
class AgentOp : public AgentStream {
 public:
  ~AgentOp() override;
  AgentOp(const AgentOp&) = delete;
  AgentOp& operator=(const AgentOp&) = delete;

  bool Next(Message* m, int timeout_ms = -1) override;
  bool SendData(uint8_t channel, std::string_view data, bool end) override;
  bool SendDataWindowed(uint8_t channel, std::string_view data, bool end) override;
  void Ack(uint32_t bytes) override;
  void Cancel() override;

 private:
  friend class AgentConnection;
  AgentOp(std::shared_ptr<AgentConnection> conn, uint32_t stream)
      : conn_(std::move(conn)), stream_(stream) {}
  // `cost`: what the message counts against kMaxQueued until it is taken.
  void Push(Message m, uint64_t cost = 0);
  void AddCredit(uint32_t bytes);

  std::shared_ptr<AgentConnection> conn_;
  uint32_t stream_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Message, uint64_t>> queue_;  // with each one's cost
  bool answered_ = false;
  uint64_t credit_ = 0;  // bytes SendDataWindowed may still send
  // Output the agent sent that the consumer has not acknowledged (it may
  // send at most the window ahead), and bytes of answers waiting in queue_.
  uint64_t unacked_ = 0;
  uint64_t queued_ = 0;
};

class AgentConnection : public AgentChannel, public std::enable_shared_from_this<AgentConnection> {
 public:
  // What an agent may make kilnd hold, and how long a write may wait.
  static constexpr int kWriteDeadlineMs = 20000;
  static constexpr size_t kMaxMessage = 16u << 20;  // one JSON answer or event
  static constexpr size_t kMaxPartial = 32u << 20;  // every half-received message
  static constexpr size_t kMaxQueued = 16u << 20;   // answers waiting in one op
  // Output past the window: what the agent read before it saw the window
  // close (a read of each of stdout and stderr, at most a frame each).
  static constexpr size_t kWindowSlack = 256u << 10;
  // How long SendDataWindowed waits for the agent to grant credit before
  // it gives the stream up (cancelled, false).
  static constexpr int kWindowWaitMs = 30000;

  // Opens the FIFOs, starts a session and waits for the agent's sync marker.
  // `label` names the sandbox in log lines.
  static Result<std::shared_ptr<AgentConnection>> Connect(const std::string& in_fifo,
                                                          const std::string& out_fifo,
                                                          int timeout_ms,
                                                          const std::string& label = "");
  ~AgentConnection() override;

  std::unique_ptr<AgentStream> Start(const nlohmann::json& request) override;
  bool alive() const override { return alive_; }
  void OnClose(std::function<void()> cb) override;
  void Close() override;
  void Abort() override;
  std::string close_reason() const override;
  // Called (at most once per kSilenceEvery) when a wait for the agent
  // times out, the agent has sent nothing for kSilenceEvery and does not
  // answer a ping within a second. The engine uses it to send SIGCONT to the
  // sandbox's PID 1: root inside may stop the agent (gVisor lets `kill
  // -STOP 1` through), and nothing inside can start it again. Set it before
  // the connection is used.
  void OnSilence(std::function<void()> cb) { on_silence_ = std::move(cb); }
  static constexpr int64_t kSilenceEvery = 5000;  // ms

 private:
  friend class AgentOp;
  void Silent();
  AgentConnection() = default;
  // Writes one frame whole within kWriteDeadlineMs; false (and the channel
  // broken as agent_unresponsive) if the agent does not take it in time.
  bool WriteFrame(const std::string& frame);
  void ReadLoop();
  void Unregister(uint32_t stream);
  // Gives up on the agent: the channel ends with `reason`, every op gets
  // kClosed, and the reader thread stops. Safe from any thread, once.
  void Break(const std::string& reason, const std::string& detail);
  // Delivers one message to its op, within the op's limits; false if the
  // agent broke them (the caller breaks the channel).
  // `text_size` is the answer's size as it came (what its queue counts).
  bool Deliver(uint32_t stream, AgentOp::Message m, uint64_t text_size, std::string* why);

  UniqueFd in_;   // we write requests here
  UniqueFd out_;  // we read answers here
  UniqueFd wake_r_, wake_w_;
  std::thread reader_;
  std::atomic<bool> alive_{true};
  std::mutex write_mu_;
  std::mutex mu_;
  std::map<uint32_t, AgentOp*> ops_;
  uint32_t next_stream_ = 1;
  std::function<void()> on_close_;
  std::function<void()> on_silence_;
  std::atomic<int64_t> last_silence_ms_{0};
  std::atomic<int64_t> last_heard_ms_{0};  // the last frame from the agent
  std::string initial_;                    // bytes read past the sync marker during Connect
  std::string label_;
  mutable std::mutex reason_mu_;
  std::string close_reason_;  // set once by Break()
};

}  // namespace kiln::engine
