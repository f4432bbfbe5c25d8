// kilnd's side of the agent protocol (src/proto/ops.h): one typed call per
// operation. A call returns the op's decoded answer or a Status (the
// agent's error answer, agent_timeout when it does not answer in time,
// not_running when the channel ends); a streaming op returns an object of
// src/engine/agent_streams.h. Callers see neither op names nor frames.
//
// A cheap value: a handle on the channel, copied freely; thread-safe as the
// channel is.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/agent_answer.h"
#include "engine/agent_channel.h"
#include "engine/agent_streams.h"
#include "proto/ops.h"

namespace kiln::engine {

// How long a call waits for its answer unless it says otherwise.
inline constexpr int kAgentCallMs = 30000;

class AgentClient {
 public:
  explicit AgentClient(std::shared_ptr<AgentChannel> channel) : channel_(std::move(channel)) {}

  Result<proto::Pong> Ping(int timeout_ms = kAgentCallMs) const;
  Result<proto::OomKilled> Oom(int timeout_ms = kAgentCallMs) const;
  // Turns the sudo shim on or off (SandboxSpec::sudo).
  Status Configure(bool sudo) const;
  // Readies a restored copy's first process (proto::kWarm).
  Result<proto::Warmed> Warm(int timeout_ms = kAgentCallMs) const;

  // `xattr_prefix`: the entries' extended attributes under it ("": none).
  Result<proto::FileStat> Stat(const std::string& path, std::string xattr_prefix = {}) const;
  Result<std::vector<proto::FileEntry>> List(const std::string& path, int depth,
                                             std::string xattr_prefix = {}) const;
  Result<proto::FileEntry> Mkdir(const std::string& path, bool parents) const;
  // Waits up to 120 s: removing a large tree takes a while.
  Result<proto::FileRemoved> Remove(const std::string& path, bool recursive) const;
  Result<proto::FileEntry> Rename(const std::string& from, const std::string& to, bool overwrite,
                                  std::string xattr_prefix = {}) const;

  Result<proto::ProcessInfo> ProcessStart(const proto::ProcStartRequest& request) const;
  Result<std::vector<proto::ProcessInfo>> ProcessList() const;
  Result<proto::ProcessInfo> ProcessGet(const std::string& id) const;
  // Output from `cursor`, the agent waiting up to wait_ms for some; the
  // call waits up to timeout_ms in all.
  Result<proto::OutputPage> ProcessOutput(const std::string& id, uint64_t cursor, int64_t wait_ms,
                                          int timeout_ms) const;
  // Bytes to the process's stdin (closing it after them if eof); the stdin
  // offset after them.
  Result<uint64_t> ProcessWrite(const std::string& id, std::string_view bytes, bool eof) const;
  Result<proto::ProcessInfo> ProcessSignal(const std::string& id, const std::string& signal) const;
  // A new window size for the process's terminal; invalid_request when it
  // has none (or has ended).
  Result<proto::ProcessInfo> ProcessResize(const std::string& id, proto::TerminalSize size) const;

  // File watches, kept by the agent (src/agent/watches.h).
  Result<proto::WatchInfo> WatchStart(const proto::WatchStartRequest& request) const;
  // Items from `cursor`, the agent waiting up to wait_ms for some; the call
  // waits up to timeout_ms in all.
  Result<proto::WatchPage> WatchRead(const std::string& id, uint64_t cursor, int64_t wait_ms,
                                     int timeout_ms) const;
  // Whether it was running (false: it had ended, and is now forgotten).
  Result<bool> WatchStop(const std::string& id) const;
  Result<std::vector<proto::WatchInfo>> WatchList() const;

  // Runs a command; `stdin_bytes`, if any, is its whole stdin (the
  // request's stdin_data follows it).
  ExecRun Exec(proto::ExecRequest request,
               const std::optional<std::string>& stdin_bytes = std::nullopt) const;
  // Opens a file for reading (its size known); waits up to 30 s for that.
  Result<ContentReader> ReadFile(const std::string& path) const;
  // Replaces a file with what the writer is given (mode: permission bits):
  // a temporary file renamed over it, or written into it when in_place.
  FileWriter WriteFile(const proto::FileWriteRequest& request) const;
  // A directory as a tar stream (gzip'ed if asked); waits up to 30 s for tar
  // to start.
  Result<ContentReader> ArchiveGet(const std::string& path, bool gzip) const;
  // Unpacks the tar stream the writer is given into a directory; waits up to
  // 30 s for tar to start.
  Result<ArchiveWriter> ArchivePut(const std::string& path, bool gzip) const;

  // The sandbox's egress proxy: its accepted connections, and each one's bytes.
  EgressListener EgressListen() const;
  ByteLink EgressAttach(uint64_t conn) const;
  // A connection to 127.0.0.1:port inside, once the server accepted it;
  // port_closed when nothing listens, agent_timeout past timeout_ms.
  Result<ByteLink> PortDial(int port, int timeout_ms) const;

 private:
  template <typename Answer, typename Request>
  Result<Answer> Call(const Request& request, int timeout_ms = kAgentCallMs) const;
  std::unique_ptr<AgentStream> Open(const nlohmann::json& request) const;

  std::shared_ptr<AgentChannel> channel_;
};

}  // namespace kiln::engine
