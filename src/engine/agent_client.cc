#include "engine/agent_client.h"

#include "common/base64.h"
#include "proto/frame.h"

namespace kiln::engine {

using nlohmann::json;

namespace {

// How long a transfer waits for the agent to start it (open the file,
// start tar).
constexpr int kStartMs = 30000;

}  // namespace

template <typename Answer, typename Request>
Result<Answer> AgentClient::Call(const Request& request, int timeout_ms) const {
  return DecodeAnswer<Answer>(RoundTrip(*channel_, request, timeout_ms));
}

std::unique_ptr<AgentStream> AgentClient::Open(const json& request) const {
  return channel_->Start(request);
}

Result<proto::Pong> AgentClient::Ping(int timeout_ms) const {
  return Call<proto::Pong>(proto::PingRequest{}, timeout_ms);
}

Result<proto::OomKilled> AgentClient::Oom(int timeout_ms) const {
  return Call<proto::OomKilled>(proto::OomRequest{}, timeout_ms);
}

Result<proto::Warmed> AgentClient::Warm(int timeout_ms) const {
  return Call<proto::Warmed>(proto::WarmRequest{}, timeout_ms);
}

Status AgentClient::Configure(bool sudo) const {
  auto done = Call<proto::Configured>(proto::ConfigureRequest{.sudo = sudo});
  if (!done.ok()) return done.status();
  if (done->sudo != sudo) return Status(Code::kInternal, "the agent kept sudo as it was");
  return Status::Ok();
}

Result<proto::FileStat> AgentClient::Stat(const std::string& path, std::string xattr_prefix) const {
  return Call<proto::FileStat>(
      proto::FileStatRequest{.path = path, .xattr_prefix = std::move(xattr_prefix)});
}

Result<std::vector<proto::FileEntry>> AgentClient::List(const std::string& path, int depth,
                                                        std::string xattr_prefix) const {
  auto list = Call<proto::FileList>(proto::FileListRequest{
      .path = path, .depth = depth, .xattr_prefix = std::move(xattr_prefix)});
  if (!list.ok()) return list.status();
  return std::move(list->data);
}

Result<proto::FileEntry> AgentClient::Mkdir(const std::string& path, bool parents) const {
  return Call<proto::FileEntry>(proto::FileMkdirRequest{.path = path, .parents = parents});
}

Result<proto::FileRemoved> AgentClient::Remove(const std::string& path, bool recursive) const {
  return Call<proto::FileRemoved>(proto::FileRemoveRequest{.path = path, .recursive = recursive},
                                  120000);
}

Result<proto::FileEntry> AgentClient::Rename(const std::string& from, const std::string& to,
                                             bool overwrite, std::string xattr_prefix) const {
  return Call<proto::FileEntry>(proto::FileRenameRequest{
      .from = from, .to = to, .overwrite = overwrite, .xattr_prefix = std::move(xattr_prefix)});
}

Result<proto::ProcessInfo> AgentClient::ProcessStart(const proto::ProcStartRequest& request) const {
  return Call<proto::ProcessInfo>(request);
}

Result<std::vector<proto::ProcessInfo>> AgentClient::ProcessList() const {
  auto list = Call<proto::ProcessList>(proto::ProcListRequest{});
  if (!list.ok()) return list.status();
  return std::move(list->data);
}

Result<proto::ProcessInfo> AgentClient::ProcessGet(const std::string& id) const {
  return Call<proto::ProcessInfo>(proto::ProcGetRequest{.id = id});
}

Result<proto::OutputPage> AgentClient::ProcessOutput(const std::string& id, uint64_t cursor,
                                                     int64_t wait_ms, int timeout_ms) const {
  return Call<proto::OutputPage>(
      proto::ProcOutputRequest{.id = id, .cursor = cursor, .wait_ms = wait_ms}, timeout_ms);
}

Result<uint64_t> AgentClient::ProcessWrite(const std::string& id, std::string_view bytes,
                                           bool eof) const {
  auto written = Call<proto::ProcWritten>(
      proto::ProcWriteRequest{.id = id, .base64 = Base64Encode(bytes), .eof = eof});
  if (!written.ok()) return written.status();
  return written->offset;
}

Result<proto::ProcessInfo> AgentClient::ProcessSignal(const std::string& id,
                                                      const std::string& signal) const {
  return Call<proto::ProcessInfo>(proto::ProcSignalRequest{.id = id, .signal = signal});
}

Result<proto::ProcessInfo> AgentClient::ProcessResize(const std::string& id,
                                                      proto::TerminalSize size) const {
  return Call<proto::ProcessInfo>(proto::ProcResizeRequest{.id = id, .size = size});
}

Result<proto::WatchInfo> AgentClient::WatchStart(const proto::WatchStartRequest& request) const {
  return Call<proto::WatchInfo>(request);
}

Result<proto::WatchPage> AgentClient::WatchRead(const std::string& id, uint64_t cursor,
                                                int64_t wait_ms, int timeout_ms) const {
  return Call<proto::WatchPage>(
      proto::WatchReadRequest{.id = id, .cursor = cursor, .wait_ms = wait_ms}, timeout_ms);
}

Result<bool> AgentClient::WatchStop(const std::string& id) const {
  auto stopped = Call<proto::WatchStopped>(proto::WatchStopRequest{.id = id});
  if (!stopped.ok()) return stopped.status();
  return stopped->stopped;
}

Result<std::vector<proto::WatchInfo>> AgentClient::WatchList() const {
  auto list = Call<proto::WatchList>(proto::WatchListRequest{});
  if (!list.ok()) return list.status();
  return std::move(list->data);
}

ExecRun AgentClient::Exec(proto::ExecRequest request,
                          const std::optional<std::string>& stdin_bytes) const {
  request.stdin_data = stdin_bytes.has_value();
  ExecRun run(Open(request));
  if (stdin_bytes) run.op_.stream().SendData(proto::kStdin, *stdin_bytes, true);
  return run;
}

Result<ContentReader> AgentClient::ReadFile(const std::string& path) const {
  AckingStream op(Open(proto::FileReadRequest{.path = path}));
  auto first = op.First(kStartMs);
  if (!first.ok()) return first.status();
  auto start = DecodeAnswer<proto::FileReadStart>(*first);
  return ContentReader(std::move(op), /*tar=*/false, start.ok() ? start->size : 0);
}

FileWriter AgentClient::WriteFile(const proto::FileWriteRequest& request) const {
  return FileWriter(AckingStream(Open(request)));
}

Result<ContentReader> AgentClient::ArchiveGet(const std::string& path, bool gzip) const {
  AckingStream op(Open(proto::ArchiveGetRequest{.path = path, .gzip = gzip}));
  auto first = op.First(kStartMs);  // tar's start
  if (!first.ok()) return first.status();
  return ContentReader(std::move(op), /*tar=*/true, 0);
}

Result<ArchiveWriter> AgentClient::ArchivePut(const std::string& path, bool gzip) const {
  AckingStream op(Open(proto::ArchivePutRequest{.path = path, .gzip = gzip}));
  auto first = op.First(kStartMs);  // tar's start
  if (!first.ok()) return first.status();
  return ArchiveWriter(std::move(op));
}

EgressListener AgentClient::EgressListen() const {
  return EgressListener(Open(proto::EgressListenRequest{}));
}

ByteLink AgentClient::EgressAttach(uint64_t conn) const {
  return ByteLink(Open(proto::EgressAttachRequest{.conn = conn}));
}

Result<ByteLink> AgentClient::PortDial(int port, int timeout_ms) const {
  AckingStream op(Open(proto::PortDialRequest{.port = port}));
  auto first = op.First(timeout_ms);  // PortOpened, or port_closed
  if (!first.ok()) {
    op.stream().Cancel();
    return first.status();
  }
  return ByteLink(std::move(op));
}

}  // namespace kiln::engine
