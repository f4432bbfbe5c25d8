// The streaming halves of SandboxIo (io/sandbox_io.h): a running command's
// events, a download (a file or a tar stream) and an upload. Each holds the
// agent's stream; dropping one unfinished stops the transfer in the
// sandbox. Flow control is the agent's: a piece is acknowledged when the
// caller comes back for the next, so a slow client slows the sandbox down
// instead of piling output up in kilnd.
//
// Move-only; one thread at a time, except Cancel(), which any may call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "io/types.h"

namespace kiln::engine {
class ArchiveWriter;
class ByteLink;
class ContentReader;
class ExecRun;
class FileWriter;
}  // namespace kiln::engine

namespace kiln::io {

class ExecStream {
 public:
  explicit ExecStream(engine::ExecRun run);
  ExecStream(ExecStream&&) noexcept;
  ExecStream& operator=(ExecStream&&) noexcept;
  ~ExecStream();

  // Waits up to timeout_ms for the next event; false if none came. After
  // kExit, kError or kClosed every call yields kClosed.
  bool Next(ExecEvent* event, int timeout_ms);
  // Stops the command and everything it started.
  void Cancel();

 private:
  std::unique_ptr<engine::ExecRun> run_;
};

// A file (its size known when it was opened) or a tar stream.
class Download {
 public:
  explicit Download(engine::ContentReader reader);
  Download(Download&&) noexcept;
  Download& operator=(Download&&) noexcept;
  ~Download();

  // A file's size when it was opened (0 for a tar stream): no more than
  // this comes.
  uint64_t size() const;
  // The next piece, waiting up to timeout_ms for it; false at the end,
  // when status() says whether all came (OK) or why not.
  bool Next(std::string* chunk, int timeout_ms);
  const Status& status() const;
  void Cancel();

 private:
  std::unique_ptr<engine::ContentReader> reader_;
};

// One TCP connection to a server inside the sandbox (SandboxIo::DialPort):
// its bytes both ways. Receive() on one thread, Send() on another, Cancel()
// from any.
class PortConnection {
 public:
  enum class Got { kData, kTimeout, kEnded };
  explicit PortConnection(engine::ByteLink link);
  PortConnection(PortConnection&&) noexcept;
  PortConnection& operator=(PortConnection&&) noexcept;
  ~PortConnection();

  // Bytes from the server (*end: it sent its last); kEnded once the
  // connection is over.
  Got Receive(std::string* data, bool* end, int timeout_ms = -1);
  // Bytes to the server, never more than the sandbox's window ahead
  // (blocks while it is full); false once the connection is over.
  bool Send(std::string_view data, bool end = false);
  // Ends the connection at once (the server sees it closed).
  void Cancel();

 private:
  std::unique_ptr<engine::ByteLink> link_;
};

// Content to the sandbox, piece by piece.
class Upload {
 public:
  virtual ~Upload() = default;
  // not_running if the sandbox is gone.
  virtual Status Write(std::string_view chunk) = 0;
  // Stops the transfer: the sandbox drops what it received.
  virtual void Cancel() = 0;
};

// A file, replaced atomically once finished.
class FileUpload final : public Upload {
 public:
  explicit FileUpload(engine::FileWriter writer);
  FileUpload(FileUpload&&) noexcept;
  ~FileUpload() override;

  Status Write(std::string_view chunk) override;
  void Cancel() override;
  // Ends the file and waits for it to be in place (up to 120 s); the size
  // the sandbox wrote.
  Result<uint64_t> Finish();

 private:
  std::unique_ptr<engine::FileWriter> writer_;
};

// A tar stream (gzip'ed or not) unpacked into a directory as it comes.
class ArchiveUpload final : public Upload {
 public:
  explicit ArchiveUpload(engine::ArchiveWriter writer);
  ArchiveUpload(ArchiveUpload&&) noexcept;
  ~ArchiveUpload() override;

  Status Write(std::string_view chunk) override;
  void Cancel() override;
  // Ends the stream and waits for tar to finish (up to 300 s).
  Result<ArchiveUnpacked> Finish();

 private:
  std::unique_ptr<engine::ArchiveWriter> writer_;
};

}  // namespace kiln::io
