// The Connect protocol (connectrpc.com/docs/protocol) as envd speaks it to
// E2B's SDKs, in kiln's own small codec: unary calls carry a bare message
// (application/proto or application/json); streams carry envelopes (one
// flag byte, a 4-byte big-endian length, the message) and end with an
// end-stream envelope holding JSON {"error": {...}?, "metadata": {}}.
// Messages are protobuf binary or proto3 JSON (protobuf's own printer and
// parser); compression is "identity" only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <google/protobuf/message.h>

#include "common/status.h"

namespace kiln::api::e2b::connect {

// The largest message kilnd takes from a client, envelope or bare: an
// SDK's biggest (a SendInput) is far below.
inline constexpr size_t kMaxMessageBytes = 4 << 20;
inline constexpr uint8_t kFlagCompressed = 0x01;
inline constexpr uint8_t kFlagEndStream = 0x02;

// Connect's name for a kiln code ("not_found"), and the HTTP status a
// unary error answers with for it.
std::string_view ConnectCode(Code code);
int HttpStatusOf(std::string_view connect_code);

// A request's framing and codec, from its Content-Type.
struct Protocol {
  bool streaming = false;  // application/connect+{proto,json}
  bool json = false;
  std::string ContentType() const;
};
// nullopt when the content type is none of Connect's.
std::optional<Protocol> ParseContentType(std::string_view content_type);

// Connect-Timeout-Ms: at most 10 digits (nullopt when absent; an
// invalid_request Status when malformed).
Result<std::optional<int64_t>> ParseTimeoutMs(std::string_view header);

// Whether a Content-Encoding / Connect-Content-Encoding is one kilnd reads.
bool IdentityEncoding(std::string_view encoding);

// One envelope around `message`.
std::string Envelope(uint8_t flags, std::string_view message);
// The end-stream envelope's JSON: {"error": {"code","message"}} for an
// error, {} for OK, each with "metadata": {}.
std::string EndStreamJson(const Status& status);
// A unary error's body: {"code": "not_found", "message": "..."}.
std::string ErrorJson(const Status& status);

// Splits a byte stream into envelopes as it arrives. Holds at most one
// message (under max_message) plus one fed piece.
class EnvelopeReader {
 public:
  explicit EnvelopeReader(size_t max_message = kMaxMessageBytes) : max_message_(max_message) {}

  enum class Got { kMessage, kNeedMore, kError };
  // Adds bytes; an error when more than a message and a piece pile up
  // (the caller must take messages out with Next between feeds).
  Status Feed(std::string_view bytes);
  // The next whole envelope. kError (with *error set, invalid_request)
  // for a length over the cap or a compressed flag.
  Got Next(uint8_t* flags, std::string* message, Status* error);
  // At the stream's end: an error if a partial envelope is left.
  Status Finish() const;

 private:
  size_t max_message_;
  std::string buf_;
  size_t pos_ = 0;
};

// Decodes and encodes messages in the request's codec.
class Codec {
 public:
  explicit Codec(bool json) : json_(json) {}
  bool json() const { return json_; }
  // invalid_request naming the message and what is wrong.
  Status Decode(std::string_view bytes, google::protobuf::Message* message) const;
  std::string Encode(const google::protobuf::Message& message) const;

 private:
  bool json_;
};

}  // namespace kiln::api::e2b::connect
