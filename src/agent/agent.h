// The agent: PID 1 of every sandbox. Serves kilnd's requests over the
// agent channel: commands, background processes and files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/channel.h"
#include "agent/command.h"
#include "agent/event_loop.h"
#include "agent/run_as.h"
#include "agent/spawn.h"
#include "proto/ops.h"

namespace kiln::agent {

class ProcessTable;
class WatchTable;
class Egress;

// An operation that lives across several frames (an exec, a file transfer).
class Stream {
 public:
  virtual ~Stream() = default;
  virtual void OnData(uint8_t /*channel*/, std::string /*data*/, bool /*end*/) {}
  virtual void OnWindow(uint32_t /*bytes*/) {}
};

class Agent : public Channel::Handler {
 public:
  explicit Agent(EventLoop& loop);
  ~Agent() override;

  void OnRequest(uint32_t stream, nlohmann::json request) override;
  void OnData(uint32_t stream, uint8_t channel, std::string data, bool end) override;
  void OnCancel(uint32_t stream) override;
  void OnWindow(uint32_t stream, uint32_t bytes) override;
  void OnNewSession() override;

  void OnChildSignal() { registry_.ReapAll(); }

  EventLoop& loop() { return loop_; }
  Channel& channel() { return *channel_; }
  CommandRegistry& registry() { return registry_; }

  // Ends a stream: its object is destroyed once the current callback returns.
  void Finish(uint32_t stream);
  void Attach(uint32_t stream, std::unique_ptr<Stream> s);

  // A unique owner token for a new command ("e17", "p3").
  std::string NewToken(char kind);

 private:
  void HandleExec(uint32_t stream, const proto::ExecRequest& req);
  // agent.warm: a child forked and reaped, so the first command finds the
  // Sentry's stub process for a new address space ready (proto::kWarm).
  proto::Warmed WarmAddressSpace();
  void HandleArchive(uint32_t stream, const std::string& path, bool gzip, bool put);

  EventLoop& loop_;
  CommandRegistry registry_;
  std::unique_ptr<Channel> channel_;
  std::unique_ptr<ProcessTable> processes_;
  std::unique_ptr<WatchTable> watches_;
  std::unique_ptr<Egress> egress_;
  std::unordered_map<uint32_t, std::unique_ptr<Stream>> streams_;
  std::vector<std::unique_ptr<Stream>> finished_;
  uint64_t next_token_ = 1;
};

// Builds the spawn spec of a user command from argv/command, env, cwd:
// runs as `user` with the standard environment. Returns "" or an error
// message naming the field.
std::string UserSpawnSpec(const proto::CommandSpec& req, SpawnSpec* spec);

// Describes a failure to start as a shell would, for a command's stderr.
std::string SpawnFailureText(const SpawnSpec& spec, const SpawnResult& r);

int64_t WallClockMs();

}  // namespace kiln::agent
