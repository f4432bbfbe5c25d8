// Framing of the agent channel: one byte stream per direction between kilnd
// and the kiln-agent (PID 1 of a sandbox), multiplexing many operations.
//
// Every frame is a 12-byte header followed by `length` payload bytes. The
// header carries a check byte so a reader that starts mid-stream (after a
// daemon restart) detects garbage instead of trusting it.
//
// kilnd -> agent frames are at most kMaxDaemonFrame (= PIPE_BUF) bytes, so a
// write(2) of one frame to the FIFO is atomic: a daemon killed mid-write can
// never leave half a frame for its successor. Longer messages are split into
// fragments flagged kFlagMore.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::proto {

enum class FrameType : uint8_t {
  kRequest = 1,   // daemon -> agent: JSON request that opens stream `stream`
  kData = 2,      // both: raw bytes on `channel` of a stream
  kEvent = 3,     // agent -> daemon: JSON progress event of a stream
  kResponse = 4,  // agent -> daemon: JSON final answer; the stream is over
  kCancel = 5,    // daemon -> agent: the requester is gone; stop the stream
  kWindow = 6,    // both: payload is a u32 count of bytes the sender consumed
  kHello = 7,     // daemon -> agent: JSON {nonce}; starts a session
};

enum Channel : uint8_t { kStdin = 0, kStdout = 1, kStderr = 2 };

constexpr uint8_t kFlagMore = 1;  // another fragment of this message follows
constexpr uint8_t kFlagEnd = 2;   // kData: end of this channel (EOF)

constexpr size_t kHeaderSize = 12;
constexpr size_t kMaxDaemonFrame = 4096;
constexpr size_t kMaxDaemonPayload = kMaxDaemonFrame - kHeaderSize;
constexpr size_t kMaxAgentPayload = 64 * 1024;
// Per-stream flow-control window for agent -> daemon data.
constexpr uint32_t kStreamWindow = 512 * 1024;

// After a kHello the agent writes this 8-byte magic and the hello's 8-byte
// nonce, raw, before any further frame. The daemon discards everything it
// reads up to that marker, which resynchronises a stream it joined mid-frame.
constexpr std::string_view kSyncMagic{"KILNSYNC", 8};
constexpr size_t kSyncMarkerSize = 16;

struct Frame {
  FrameType type{};
  uint8_t flags = 0;
  uint8_t channel = 0;
  uint32_t stream = 0;
  std::string payload;
};

// Appends the encoded frame to `out`.
void AppendFrame(std::string& out, FrameType type, uint32_t stream, std::string_view payload,
                 uint8_t flags = 0, uint8_t channel = 0);
std::string EncodeFrame(FrameType type, uint32_t stream, std::string_view payload,
                        uint8_t flags = 0, uint8_t channel = 0);

// Splits a message into frames whose encoded size is at most
// kHeaderSize + max_payload; all but the last carry kFlagMore.
std::vector<std::string> EncodeFragments(FrameType type, uint32_t stream, std::string_view payload,
                                         size_t max_payload, uint8_t channel = 0);

std::string EncodeWindow(uint32_t stream, uint32_t bytes);
uint32_t DecodeWindow(std::string_view payload);

std::string SyncMarker(uint64_t nonce);

// Incremental decoder: feed bytes as they arrive, take complete frames out.
class FrameDecoder {
 public:
  explicit FrameDecoder(size_t max_payload) : max_payload_(max_payload) {}

  void Feed(std::string_view bytes) { buffer_.append(bytes); }

  // Returns the next complete frame, or nullopt when more bytes are needed.
  // Sets error() on a corrupt header (bad check byte, type or length); the
  // decoder then yields nothing more.
  std::optional<Frame> Next();

  bool error() const { return error_; }
  size_t buffered() const { return buffer_.size() - offset_; }

  // Drops everything up to and including the sync marker for `nonce`.
  // Returns false (keeping a short tail) when the marker is not buffered yet.
  bool SkipToSync(uint64_t nonce);

 private:
  void Compact();

  size_t max_payload_;
  std::string buffer_;
  size_t offset_ = 0;
  bool error_ = false;
};

// Reassembles fragmented messages (kRequest/kResponse/kEvent) per stream.
// The sender chooses how many fragments it sends, so a reader of an
// untrusted sender (kilnd, reading an agent that root inside may have
// replaced) caps one message and all half-received ones together.
class Reassembler {
 public:
  explicit Reassembler(size_t max_message = SIZE_MAX, size_t max_total = SIZE_MAX)
      : max_message_(max_message), max_total_(max_total) {}

  // Returns the whole message when `frame` completes one. Past either cap
  // it returns nullopt and sets error(); it takes nothing more after that.
  std::optional<std::string> Add(const Frame& frame);
  void Drop(uint32_t stream);
  void Clear() {
    partial_.clear();
    total_ = 0;
  }
  bool error() const { return error_; }

 private:
  size_t max_message_, max_total_;
  size_t total_ = 0;  // bytes in partial_
  bool error_ = false;
  std::vector<std::pair<uint32_t, std::string>> partial_;
};

}  // namespace kiln::proto
