#include "io/sandbox_io.h"

#include <utility>

#include "common/contract.h"
#include "common/time.h"
#include "engine/agent_client.h"
#include "io/output_collector.h"
#include "io/proto_map.h"

namespace kiln::io {

namespace {

// The agent's answer in io's words, or its Status.
template <typename P>
auto Mapped(Result<P> r) -> Result<decltype(FromProto(std::move(*r)))> {
  if (!r.ok()) return r.status();
  return FromProto(std::move(*r));
}

template <typename P>
auto MappedList(Result<std::vector<P>> r) -> Result<std::vector<decltype(FromProto(P()))>> {
  if (!r.ok()) return r.status();
  std::vector<decltype(FromProto(P()))> out;
  out.reserve(r->size());
  for (auto& item : *r) out.push_back(FromProto(std::move(item)));
  return out;
}

}  // namespace

int64_t AnswerDeadline(const ExecOptions& options) {
  return MonotonicNowMs() + options.timeout_ms + contract::kExecGraceMs;
}

SandboxIo::SandboxIo(std::shared_ptr<engine::AgentChannel> channel,
                     std::map<std::string, std::string> env)
    : channel_(std::move(channel)), env_(std::move(env)) {}

engine::AgentClient SandboxIo::agent() const { return engine::AgentClient(channel_); }

ExecStream SandboxIo::Exec(const Command& command, const ExecOptions& options) const {
  return ExecStream(agent().Exec(ToProto(command, options, env_), options.stdin_bytes));
}

Result<ExecResult> SandboxIo::ExecToEnd(const Command& command, const ExecOptions& options,
                                        const std::function<bool()>& abandoned) const {
  ExecStream run = Exec(command, options);
  return CollectExec(run, options.capture_cap, AnswerDeadline(options), abandoned);
}

Result<FileStat> SandboxIo::Stat(const std::string& path, std::string_view xattr_prefix) const {
  auto stat = agent().Stat(path, std::string(xattr_prefix));
  if (!stat.ok()) return stat.status();
  return FromProto(std::move(*stat), xattr_prefix);
}

Result<std::vector<FileEntry>> SandboxIo::List(const std::string& path, int depth,
                                               std::string_view xattr_prefix) const {
  auto list = agent().List(path, depth, std::string(xattr_prefix));
  if (!list.ok()) return list.status();
  std::vector<FileEntry> out;
  out.reserve(list->size());
  for (auto& entry : *list) out.push_back(FromProto(std::move(entry), xattr_prefix));
  return out;
}

Result<FileEntry> SandboxIo::Mkdir(const std::string& path, bool parents) const {
  return Mapped(agent().Mkdir(path, parents));
}

Result<bool> SandboxIo::Remove(const std::string& path, bool recursive) const {
  auto removed = agent().Remove(path, recursive);
  if (!removed.ok()) return removed.status();
  return removed->removed;
}

Result<FileEntry> SandboxIo::Rename(const std::string& from, const std::string& to, bool overwrite,
                                    std::string_view xattr_prefix) const {
  auto entry = agent().Rename(from, to, overwrite, std::string(xattr_prefix));
  if (!entry.ok()) return entry.status();
  return FromProto(std::move(*entry), xattr_prefix);
}

Result<PortConnection> SandboxIo::DialPort(int port, int timeout_ms) const {
  auto link = agent().PortDial(port, timeout_ms);
  if (!link.ok()) return link.status();
  return PortConnection(std::move(*link));
}

Result<Download> SandboxIo::ReadFile(const std::string& path) const {
  auto reader = agent().ReadFile(path);
  if (!reader.ok()) return reader.status();
  return Download(std::move(*reader));
}

FileUpload SandboxIo::WriteFile(const std::string& path, int mode, WritePlacement placement,
                                const std::optional<XattrWrite>& xattrs) const {
  proto::FileWriteRequest request{
      .path = path, .mode = mode, .in_place = placement == WritePlacement::kInPlace};
  if (xattrs) {
    request.xattr_prefix = xattrs->prefix;
    for (const auto& [name, value] : xattrs->values) request.xattrs[xattrs->prefix + name] = value;
  }
  return FileUpload(agent().WriteFile(request));
}

Result<Download> SandboxIo::ArchiveGet(const std::string& path, bool gzip) const {
  auto reader = agent().ArchiveGet(path, gzip);
  if (!reader.ok()) return reader.status();
  return Download(std::move(*reader));
}

Result<ArchiveUpload> SandboxIo::ArchivePut(const std::string& path, bool gzip) const {
  auto writer = agent().ArchivePut(path, gzip);
  if (!writer.ok()) return writer.status();
  return ArchiveUpload(std::move(*writer));
}

Result<ProcessInfo> SandboxIo::ProcessStart(const ProcessSpec& spec) const {
  return Mapped(agent().ProcessStart(ToProto(spec, env_)));
}

Result<std::vector<ProcessInfo>> SandboxIo::ProcessList() const {
  return MappedList(agent().ProcessList());
}

Result<ProcessInfo> SandboxIo::ProcessGet(const std::string& id) const {
  return Mapped(agent().ProcessGet(id));
}

Result<OutputPage> SandboxIo::ProcessOutput(const std::string& id, uint64_t cursor, int64_t wait_ms,
                                            int timeout_ms) const {
  return Mapped(agent().ProcessOutput(id, cursor, wait_ms, timeout_ms));
}

Result<uint64_t> SandboxIo::ProcessWrite(const std::string& id, std::string_view bytes,
                                         bool eof) const {
  return agent().ProcessWrite(id, bytes, eof);
}

Result<ProcessInfo> SandboxIo::ProcessSignal(const std::string& id,
                                             const std::string& signal) const {
  return Mapped(agent().ProcessSignal(id, signal));
}

Result<ProcessInfo> SandboxIo::ProcessResize(const std::string& id, TerminalSize size) const {
  return Mapped(agent().ProcessResize(id, ToProto(size)));
}

Result<WatchInfo> SandboxIo::WatchStart(const WatchSpec& spec) const {
  return Mapped(agent().WatchStart(ToProto(spec)));
}

Result<WatchPage> SandboxIo::WatchRead(const std::string& id, uint64_t cursor, int64_t wait_ms,
                                       int timeout_ms, std::string_view xattr_prefix) const {
  auto page = agent().WatchRead(id, cursor, wait_ms, timeout_ms);
  if (!page.ok()) return page.status();
  // The agent is the sandbox's: a page past its own bounds is not passed on.
  auto malformed = [](const std::string& why) {
    return Status(Code::kInternal, "the sandbox's agent sent a malformed watch page: " + why);
  };
  if (page->items.size() > kWatchPageItems) return malformed("too many items");
  for (const auto& item : page->items) {
    if (item.seq < cursor) return malformed("an item before the cursor");
    if (item.event && (item.event->path.size() > kWatchPathMax ||
                       (item.event->old_path && item.event->old_path->size() > kWatchPathMax)))
      return malformed("a path too long");
    if (item.event && item.event->entry && item.event->entry->path.size() > kWatchPathMax)
      return malformed("an entry's path too long");
    if (item.notice && item.notice->kind.size() > 32) return malformed("a notice's kind");
  }
  return FromProto(std::move(*page), xattr_prefix);
}

Result<bool> SandboxIo::WatchStop(const std::string& id) const { return agent().WatchStop(id); }

Result<std::vector<WatchInfo>> SandboxIo::WatchList() const {
  return MappedList(agent().WatchList());
}

}  // namespace kiln::io
