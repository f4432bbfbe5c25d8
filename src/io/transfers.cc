#include "io/transfers.h"

#include <utility>

#include "engine/agent_streams.h"
#include "io/proto_map.h"

namespace kiln::io {

ExecStream::ExecStream(engine::ExecRun run)
    : run_(std::make_unique<engine::ExecRun>(std::move(run))) {}
ExecStream::ExecStream(ExecStream&&) noexcept = default;
ExecStream& ExecStream::operator=(ExecStream&&) noexcept = default;
ExecStream::~ExecStream() = default;

bool ExecStream::Next(ExecEvent* event, int timeout_ms) {
  engine::ExecEvent ev;
  if (!run_->Next(&ev, timeout_ms)) return false;
  *event = ExecEvent();
  switch (ev.kind) {
    case engine::ExecEvent::kStarted:
      event->kind = ExecEvent::kStarted;
      event->pid = ev.pid;
      break;
    case engine::ExecEvent::kOutput:
      event->kind = ExecEvent::kOutput;
      event->stream = ev.stream == 2 ? OutputStream::kStderr : OutputStream::kStdout;
      event->data = std::move(ev.data);
      break;
    case engine::ExecEvent::kExit:
      event->kind = ExecEvent::kExit;
      event->exit = FromProto(ev.exit);
      break;
    case engine::ExecEvent::kError:
      event->kind = ExecEvent::kError;
      event->error = std::move(ev.error);
      break;
    case engine::ExecEvent::kClosed:
      event->kind = ExecEvent::kClosed;
      break;
  }
  return true;
}

void ExecStream::Cancel() { run_->Cancel(); }

Download::Download(engine::ContentReader reader)
    : reader_(std::make_unique<engine::ContentReader>(std::move(reader))) {}
Download::Download(Download&&) noexcept = default;
Download& Download::operator=(Download&&) noexcept = default;
Download::~Download() = default;

uint64_t Download::size() const { return reader_->size(); }
bool Download::Next(std::string* chunk, int timeout_ms) { return reader_->Next(chunk, timeout_ms); }
const Status& Download::status() const { return reader_->status(); }
void Download::Cancel() { reader_->Cancel(); }

PortConnection::PortConnection(engine::ByteLink link)
    : link_(std::make_unique<engine::ByteLink>(std::move(link))) {}
PortConnection::PortConnection(PortConnection&&) noexcept = default;
PortConnection& PortConnection::operator=(PortConnection&&) noexcept = default;
PortConnection::~PortConnection() = default;

PortConnection::Got PortConnection::Receive(std::string* data, bool* end, int timeout_ms) {
  switch (link_->Receive(data, end, timeout_ms)) {
    case engine::ByteLink::Got::kData:
      return Got::kData;
    case engine::ByteLink::Got::kTimeout:
      return Got::kTimeout;
    case engine::ByteLink::Got::kEnded:
      break;
  }
  return Got::kEnded;
}
bool PortConnection::Send(std::string_view data, bool end) { return link_->Send(data, end); }
void PortConnection::Cancel() { link_->Cancel(); }

FileUpload::FileUpload(engine::FileWriter writer)
    : writer_(std::make_unique<engine::FileWriter>(std::move(writer))) {}
FileUpload::FileUpload(FileUpload&&) noexcept = default;
FileUpload::~FileUpload() = default;

Status FileUpload::Write(std::string_view chunk) { return writer_->Write(chunk); }
void FileUpload::Cancel() { writer_->Cancel(); }

Result<uint64_t> FileUpload::Finish() {
  auto written = writer_->Finish();
  if (!written.ok()) return written.status();
  return written->size;
}

ArchiveUpload::ArchiveUpload(engine::ArchiveWriter writer)
    : writer_(std::make_unique<engine::ArchiveWriter>(std::move(writer))) {}
ArchiveUpload::ArchiveUpload(ArchiveUpload&&) noexcept = default;
ArchiveUpload::~ArchiveUpload() = default;

Status ArchiveUpload::Write(std::string_view chunk) { return writer_->Write(chunk); }
void ArchiveUpload::Cancel() { writer_->Cancel(); }

Result<ArchiveUnpacked> ArchiveUpload::Finish() {
  auto done = writer_->Finish();
  if (!done.ok()) return done.status();
  return ArchiveUnpacked{.exit = FromProto(done->exit),
                         .stderr_head = std::move(done->stderr_head)};
}

}  // namespace kiln::io
