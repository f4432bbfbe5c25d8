// The streaming operations of AgentClient (exec, file and archive
// transfers, egress) as objects that hide the stream's frames and channels.
//
// Output is acknowledged (flow control: src/proto/frame.h kStreamWindow)
// when the caller comes back for more, that is once it has dealt with the
// previous piece: a slow consumer (an HTTP client) slows the agent down
// instead of piling up output in kilnd.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "engine/agent_channel.h"
#include "proto/ops.h"

namespace kiln::engine {

// An operation's stream with the acknowledgement of what it last handed
// out, and room to put one message back. The building block of the rest.
class AckingStream {
 public:
  explicit AckingStream(std::unique_ptr<AgentStream> stream) : stream_(std::move(stream)) {}

  // The next message, after acknowledging the data of the previous one;
  // false after timeout_ms (-1: no limit).
  bool Next(AgentStream::Message* m, int timeout_ms);
  // Next() returns `m`, the message it returned last, again first (its
  // data acknowledged only then).
  void PutBack(AgentStream::Message m) {
    put_back_ = std::move(m);
    unacked_ = 0;
  }
  // Waits for the op's first message: an error answer, the end of the
  // channel or silence for timeout_ms is a Status; an event is returned
  // (and consumed); anything else is put back for later.
  Result<nlohmann::json> First(int timeout_ms);
  AgentStream& stream() { return *stream_; }

 private:
  std::unique_ptr<AgentStream> stream_;
  std::optional<AgentStream::Message> put_back_;
  uint32_t unacked_ = 0;
};

// What an exec brings: its start, output, end (exit, error or a channel
// that closed).
struct ExecEvent {
  enum Kind { kStarted, kOutput, kExit, kError, kClosed } kind = kClosed;
  int pid = 0;           // kStarted
  uint8_t stream = 0;    // kOutput: 1 stdout, 2 stderr
  std::string data;      // kOutput
  proto::ExecExit exit;  // kExit
  Status error;          // kError
};

class ExecRun {
 public:
  // Waits up to timeout_ms for the next event; false if none came. After
  // kExit, kError or kClosed every call yields kClosed.
  bool Next(ExecEvent* event, int timeout_ms);
  // Stops the command and everything it started.
  void Cancel() { op_.stream().Cancel(); }

 private:
  friend class AgentClient;
  explicit ExecRun(std::unique_ptr<AgentStream> s) : op_(std::move(s)) {}
  AckingStream op_;
  bool over_ = false;
};

// Content from the agent: a file (file.read) or a tar stream (archive.get).
class ContentReader {
 public:
  // file.read: the file's size when it was opened; no more than this many
  // bytes come (a file that grows while it is read is cut there), or up to
  // kUnsizedMax of a file that reported 0 (procfs), past which the read
  // fails.
  uint64_t size() const { return size_; }
  static constexpr uint64_t kUnsizedMax = 1u << 20;
  // The next piece, waiting up to timeout_ms for each message of the agent:
  // true with it in *chunk; false at the
  // end, when status() says whether all came (OK) or why not (a failed
  // tar is io_error, silence agent_timeout, the sandbox gone not_running).
  bool Next(std::string* chunk, int timeout_ms);
  const Status& status() const { return status_; }
  // The reader is gone: stops the transfer.
  void Cancel() { op_.stream().Cancel(); }

 private:
  friend class AgentClient;
  ContentReader(AckingStream op, bool tar, uint64_t size)
      : op_(std::move(op)), tar_(tar), size_(size) {}
  AckingStream op_;
  bool tar_;
  uint64_t size_;
  uint64_t delivered_ = 0;  // of a file: never more than size_
  bool over_ = false;
  Status status_;
};

// Content to the agent: a file (file.write) or a tar stream (archive.put).
class ContentWriter {
 public:
  // Sends the next piece; not_running if the sandbox is gone.
  Status Write(std::string_view chunk);
  // Stops the transfer: the agent drops what it received.
  void Cancel() { op_.stream().Cancel(); }

 protected:
  explicit ContentWriter(AckingStream op) : op_(std::move(op)) {}
  // Ends the content and waits up to timeout_ms for the answer, keeping the
  // first 4 KiB the op wrote on stderr (data 2) in *err.
  Result<nlohmann::json> End(int timeout_ms, std::string* err);
  AckingStream op_;
};

class FileWriter : public ContentWriter {
 public:
  // Ends the file and waits for it to be in place (up to 120 s).
  Result<proto::FileWritten> Finish();

 private:
  friend class AgentClient;
  using ContentWriter::ContentWriter;
};

struct ArchiveUnpacked {
  proto::ExecExit exit;  // tar's
  std::string stderr_head;
};

class ArchiveWriter : public ContentWriter {
 public:
  // Ends the tar stream and waits for tar to finish (up to 300 s).
  Result<ArchiveUnpacked> Finish();

 private:
  friend class AgentClient;
  using ContentWriter::ContentWriter;
};

// The connections the sandbox's egress proxy accepts. Next() on one thread;
// Cancel() from any.
class EgressListener {
 public:
  // Blocks for the next connection; false once listening ended (cancelled,
  // the sandbox gone).
  bool Next(uint64_t* conn);
  void Cancel() { op_.stream().Cancel(); }

 private:
  friend class AgentClient;
  explicit EgressListener(std::unique_ptr<AgentStream> s) : op_(std::move(s)) {}
  AckingStream op_;
};

// One TCP connection's bytes, both ways: an accepted egress connection, or
// a port of the sandbox's dialled by kilnd. Receive() on one thread, Send()
// on another, Cancel() from any.
class ByteLink {
 public:
  enum class Got { kData, kTimeout, kEnded };
  // Bytes from the sandbox's client (*end: it sent its last); kEnded once
  // the connection is over.
  Got Receive(std::string* data, bool* end, int timeout_ms = -1);
  // Bytes to the client, never more than the agent's window ahead (blocks
  // while it is full); false once the connection is over.
  bool Send(std::string_view data, bool end);
  // Ends the connection (at once: the agent closes the client's socket).
  void Cancel() { op_.stream().Cancel(); }

 private:
  friend class AgentClient;
  explicit ByteLink(std::unique_ptr<AgentStream> s) : op_(std::move(s)) {}
  explicit ByteLink(AckingStream op) : op_(std::move(op)) {}
  AckingStream op_;
};

}  // namespace kiln::engine
