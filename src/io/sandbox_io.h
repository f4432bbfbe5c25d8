// I/O into one running sandbox, as every front asks for it: run a command
// (as a stream of events or to its end), move files and trees, drive
// background processes. io::Service::Reach (io/service.h) hands one out;
// the fronts never see the agent's client or its wire structs.
//
// A cheap value: a handle on the sandbox's agent channel and a copy of its
// env, copied freely; thread-safe as the channel is. Calls answer a Status
// for what the sandbox refused (its error names: file_not_found, ...),
// agent_timeout when it does not answer in time and not_running when it
// went away.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "io/transfers.h"
#include "io/types.h"

namespace kiln::engine {
class AgentChannel;
class AgentClient;
}  // namespace kiln::engine

namespace kiln::io {

// When to give up on a command's answer: its timeout and the grace the
// contract allows past it (contract::kExecGraceMs), on MonotonicNowMs.
int64_t AnswerDeadline(const ExecOptions& options);

// Most items one watch read answers (the agent sends up to 1000), and the
// longest path an event may carry; past either the answer is refused.
inline constexpr size_t kWatchPageItems = 4096;
inline constexpr size_t kWatchPathMax = 4096;

class SandboxIo {
 public:
  // `env`: the sandbox's, put under every command's own.
  SandboxIo(std::shared_ptr<engine::AgentChannel> channel, std::map<std::string, std::string> env);

  // ---- Commands ----
  ExecStream Exec(const Command& command, const ExecOptions& options) const;
  // Runs it to its end under AnswerDeadline, keeping options.capture_cap of
  // each stream (io/output_collector.h); `abandoned` says the caller left.
  Result<ExecResult> ExecToEnd(const Command& command, const ExecOptions& options,
                               const std::function<bool()>& abandoned) const;

  // ---- Files ----
  // `xattr_prefix` (here and below): the entries' extended attributes
  // under it ("user.e2b."), none when empty.
  Result<FileStat> Stat(const std::string& path, std::string_view xattr_prefix = {}) const;
  // `path` and what is below it, `depth` levels down.
  Result<std::vector<FileEntry>> List(const std::string& path, int depth,
                                      std::string_view xattr_prefix = {}) const;
  Result<FileEntry> Mkdir(const std::string& path, bool parents) const;
  // Whether there was something to remove; waits up to 120 s.
  Result<bool> Remove(const std::string& path, bool recursive) const;
  Result<FileEntry> Rename(const std::string& from, const std::string& to, bool overwrite,
                           std::string_view xattr_prefix = {}) const;
  // Waits up to 30 s for the file to open.
  Result<Download> ReadFile(const std::string& path) const;
  // Replaces the file with what the upload is given (mode: permission bits),
  // atomically unless asked to write in place; with `xattrs`, the file is
  // left with exactly those under their prefix.
  FileUpload WriteFile(const std::string& path, int mode,
                       WritePlacement placement = WritePlacement::kAtomic,
                       const std::optional<XattrWrite>& xattrs = std::nullopt) const;
  // A directory as a tar stream (gzip'ed if asked); waits up to 30 s for tar.
  Result<Download> ArchiveGet(const std::string& path, bool gzip) const;
  // Unpacks a tar stream into a directory; waits up to 30 s for tar.
  Result<ArchiveUpload> ArchivePut(const std::string& path, bool gzip) const;

  // ---- Ports ----
  // A connection to a server listening on 127.0.0.1:port inside, once it
  // accepted; port_closed when nothing listens, agent_timeout past
  // timeout_ms.
  Result<PortConnection> DialPort(int port, int timeout_ms) const;

  // ---- Background processes ----
  Result<ProcessInfo> ProcessStart(const ProcessSpec& spec) const;
  // Oldest first.
  Result<std::vector<ProcessInfo>> ProcessList() const;
  Result<ProcessInfo> ProcessGet(const std::string& id) const;
  // Output from `cursor`, the sandbox waiting up to wait_ms for some; the
  // call waits up to timeout_ms in all.
  Result<OutputPage> ProcessOutput(const std::string& id, uint64_t cursor, int64_t wait_ms,
                                   int timeout_ms) const;
  // Bytes to its stdin (closed after them if eof); the stdin offset after.
  Result<uint64_t> ProcessWrite(const std::string& id, std::string_view bytes, bool eof) const;
  // `signal`: "SIGTERM", ...; sent to the process's group.
  Result<ProcessInfo> ProcessSignal(const std::string& id, const std::string& signal) const;
  // A new window for its terminal; invalid_request when it has none.
  Result<ProcessInfo> ProcessResize(const std::string& id, TerminalSize size) const;

  // ---- File watches (the sandbox keeps them: src/agent/watches.h) ----
  Result<WatchInfo> WatchStart(const WatchSpec& spec) const;
  // Items from `cursor`, the sandbox waiting up to wait_ms for some; the
  // call waits up to timeout_ms in all. What the sandbox sends is checked
  // against the agent's bounds (kWatchPageItems, kWatchPathMax).
  Result<WatchPage> WatchRead(const std::string& id, uint64_t cursor, int64_t wait_ms,
                              int timeout_ms, std::string_view xattr_prefix = {}) const;
  // Whether it was running (false: it had ended, and is now forgotten).
  Result<bool> WatchStop(const std::string& id) const;
  Result<std::vector<WatchInfo>> WatchList() const;

 private:
  engine::AgentClient agent() const;

  std::shared_ptr<engine::AgentChannel> channel_;
  std::map<std::string, std::string> env_;
};

}  // namespace kiln::io
