// kilnd's end of one sandbox's agent channel: two FIFOs in the sandbox's
// host directory (agent.in, agent.out) that the sandbox holds as its stdio.
// Because they are named, a restarted kilnd can open them again and resume
// with a new session (hello + sync marker).
//
// Many operations run at once: each is a stream with its own queue of
// messages, filled by one reader thread.
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
  void Push(Message m);
  void AddCredit(uint32_t bytes);

  std::shared_ptr<AgentConnection> conn_;
  uint32_t stream_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Message> queue_;
  bool answered_ = false;
  uint64_t credit_ = 0;  // bytes SendDataWindowed may still send
};

class AgentConnection : public AgentChannel, public std::enable_shared_from_this<AgentConnection> {
 public:
  // Opens the FIFOs, starts a session and waits for the agent's sync marker.
  static Result<std::shared_ptr<AgentConnection>> Connect(const std::string& in_fifo,
                                                          const std::string& out_fifo,
                                                          int timeout_ms);
  ~AgentConnection() override;

  std::unique_ptr<AgentStream> Start(const nlohmann::json& request) override;
  bool alive() const override { return alive_; }
  void OnClose(std::function<void()> cb) override;
  void Close() override;
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
  bool WriteFrame(const std::string& frame);
  void ReadLoop();
  void Unregister(uint32_t stream);

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
};

}  // namespace kiln::engine
