#include "engine/agent_streams.h"

#include "common/time.h"
#include "engine/agent_answer.h"
#include "proto/frame.h"

namespace kiln::engine {

using Message = AgentStream::Message;
using nlohmann::json;

namespace {

Status SandboxStopped() { return Status(Code::kNotRunning, "the sandbox stopped"); }
Status NoAnswer() { return Status(Code::kAgentTimeout, "the sandbox did not answer"); }

// What is left of a wait that started at `start` (-1 stays -1: no limit).
int Left(int timeout_ms, int64_t start) {
  if (timeout_ms < 0) return -1;
  return static_cast<int>(std::max<int64_t>(0, timeout_ms - (MonotonicNowMs() - start)));
}

}  // namespace

bool AckingStream::Next(Message* m, int timeout_ms) {
  if (unacked_ > 0) stream_->Ack(unacked_);
  unacked_ = 0;
  if (put_back_) {
    *m = std::move(*put_back_);
    put_back_.reset();
  } else if (!stream_->Next(m, timeout_ms)) {
    return false;
  }
  if (m->kind == Message::kData) unacked_ = static_cast<uint32_t>(m->data.size());
  return true;
}

Result<json> AckingStream::First(int timeout_ms) {
  Message m;
  if (!Next(&m, timeout_ms)) return NoAnswer();
  if (m.kind == Message::kClosed) return SandboxStopped();
  if (m.kind == Message::kResponse && proto::IsError(m.body)) return StatusFromAgentError(m.body);
  if (m.kind == Message::kEvent) return std::move(m.body);
  PutBack(std::move(m));
  return json(nullptr);
}

bool ExecRun::Next(ExecEvent* ev, int timeout_ms) {
  *ev = ExecEvent();
  if (over_) return true;  // kClosed
  int64_t start = MonotonicNowMs();
  Message m;
  for (;;) {
    if (!op_.Next(&m, Left(timeout_ms, start))) return false;
    switch (m.kind) {
      case Message::kEvent:
        ev->kind = ExecEvent::kStarted;
        if (auto started = DecodeAnswer<proto::ExecStarted>(m.body); started.ok())
          ev->pid = started->pid;
        return true;
      case Message::kData:
        if (m.channel != proto::kStdout && m.channel != proto::kStderr) continue;
        ev->kind = ExecEvent::kOutput;
        ev->stream = m.channel;
        ev->data = std::move(m.data);
        return true;
      case Message::kResponse:
        over_ = true;
        if (auto exit = DecodeAnswer<proto::ExecExit>(m.body); exit.ok()) {
          ev->kind = ExecEvent::kExit;
          ev->exit = std::move(*exit);
        } else {
          ev->kind = ExecEvent::kError;
          ev->error = exit.status();
        }
        return true;
      case Message::kClosed:
        over_ = true;
        return true;  // kClosed
    }
  }
}

bool ContentReader::Next(std::string* chunk, int timeout_ms) {
  Message m;
  while (!over_) {
    if (!op_.Next(&m, timeout_ms)) {
      over_ = true;
      status_ = NoAnswer();
    } else if (m.kind == Message::kData) {
      // Data 2 of archive.get is tar's stderr: not content.
      if (m.channel != proto::kStdout || m.data.empty()) continue;
      if (!tar_) {
        // A file is as long as it was when opened (a file that grows while
        // read, or an agent that sends on, ends there). One that said it
        // was empty (procfs) may hold up to kUnsizedMax.
        uint64_t limit = size_ > 0 ? size_ : kUnsizedMax;
        uint64_t room = limit - delivered_;
        if (size_ == 0 && m.data.size() > room) {
          over_ = true;
          op_.stream().Cancel();
          status_ = Status(Code::kInvalidRequest, "the file reports size 0 but holds more than " +
                                                      std::to_string(kUnsizedMax >> 20) + " MiB");
          return false;
        }
        if (m.data.size() >= room) {
          m.data.resize(room);
          over_ = true;
          op_.stream().Cancel();
        }
        delivered_ += m.data.size();
        if (m.data.empty()) continue;
      }
      *chunk = std::move(m.data);
      return true;
    } else if (m.kind == Message::kResponse) {
      over_ = true;
      if (proto::IsError(m.body)) {
        status_ = StatusFromAgentError(m.body);
      } else if (tar_) {
        // A tar that failed half-way must not look like a short archive.
        auto exit = DecodeAnswer<proto::ExecExit>(m.body);
        if (!exit.ok()) {
          status_ = exit.status();
        } else if (exit->exit_code != 0) {
          status_ = Status(Code::kIoError, "tar failed: the archive is incomplete");
        }
      }
    } else if (m.kind == Message::kClosed) {
      over_ = true;
      status_ = SandboxStopped();
    }
  }
  return false;
}

Status ContentWriter::Write(std::string_view chunk) {
  if (!chunk.empty() && !op_.stream().SendData(proto::kStdin, chunk, false))
    return SandboxStopped();
  return Status::Ok();
}

Result<json> ContentWriter::End(int timeout_ms, std::string* err) {
  op_.stream().SendData(proto::kStdin, "", true);
  Message m;
  for (;;) {
    // Each message restarts the wait: a long transfer may answer late.
    if (!op_.Next(&m, timeout_ms)) return NoAnswer();
    if (m.kind == Message::kData && m.channel == proto::kStderr && err->size() < 4096)
      *err += m.data;
    if (m.kind == Message::kClosed) return SandboxStopped();
    if (m.kind == Message::kResponse) return std::move(m.body);
  }
}

Result<proto::FileWritten> FileWriter::Finish() {
  std::string err;
  auto answer = End(120000, &err);
  if (!answer.ok()) return answer.status();
  return DecodeAnswer<proto::FileWritten>(*answer);
}

Result<ArchiveUnpacked> ArchiveWriter::Finish() {
  ArchiveUnpacked done;
  auto answer = End(300000, &done.stderr_head);
  if (!answer.ok()) return answer.status();
  auto exit = DecodeAnswer<proto::ExecExit>(*answer);
  if (!exit.ok()) return exit.status();
  done.exit = std::move(*exit);
  return done;
}

bool EgressListener::Next(uint64_t* conn) {
  Message m;
  for (;;) {
    op_.Next(&m, -1);
    if (m.kind == Message::kResponse || m.kind == Message::kClosed) return false;
    if (m.kind != Message::kEvent) continue;
    if (auto c = DecodeAnswer<proto::EgressConn>(m.body); c.ok()) {
      *conn = c->conn;
      return true;
    }
  }
}

ByteLink::Got ByteLink::Receive(std::string* data, bool* end, int timeout_ms) {
  int64_t start = MonotonicNowMs();
  Message m;
  for (;;) {
    if (!op_.Next(&m, Left(timeout_ms, start))) return Got::kTimeout;
    if (m.kind == Message::kResponse || m.kind == Message::kClosed) return Got::kEnded;
    if (m.kind != Message::kData || m.channel != proto::kStdout) continue;
    *data = std::move(m.data);
    *end = m.end;
    return Got::kData;
  }
}

bool ByteLink::Send(std::string_view data, bool end) {
  return op_.stream().SendDataWindowed(proto::kStdin, data, end);
}

}  // namespace kiln::engine
