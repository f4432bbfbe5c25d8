// Inside envd (see envd.cc): one Connect call on its way through kilnd, the
// user it runs as, and the services it is routed to.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <google/protobuf/message.h>

#include "api/context.h"
#include "api/e2b/e2b.h"
#include "api/e2b/envd/connect.h"
#include "api/e2b/sandbox_plane.h"
#include "common/run_as.h"
#include "control/sandbox.h"

namespace kiln::api::e2b {

// Who E2B's client acts as: envd's users are "user" (kiln's sandbox user)
// and "root" (kiln's as_root).
struct EnvdUser {
  bool as_root = false;
  // Where relative paths start and processes run: the user's home.
  std::string home = kE2bHome;
};
// The sandbox user's home as E2B's clients see it: the image's, except that
// kiln's base (and what is built on it) keeps it at /workspace, where E2B's
// templates keep it at /home/user: kiln-agent binds /workspace there,
// and E2B's clients are shown that name.
std::string E2bHomeOf(const RunAs& run_as);
// From `Authorization: Basic base64("name:")` (envd's) or, for /files, the
// username query parameter; the default user when neither names one.
// ApiError invalid_request for a user kiln's sandboxes do not have.
EnvdUser UserFromName(const std::string& name, const control::Sandbox& sandbox);
EnvdUser UserOf(const Exchange& ex, const control::Sandbox& sandbox);
// An absolute path with "." and ".." taken out and no repeated or trailing
// slash, as Go's filepath.Clean (envd's) gives it.
std::string CleanPath(const std::string& absolute);
// `path` made absolute against the user's home, cleaned; ApiError for an
// empty one or one too long.
std::string ResolvePath(const EnvdUser& user, const std::string& path, const char* field);

// One Connect call: its protocol, deadline and user, and the way its
// request is read and its answer written.
class Rpc {
 public:
  Rpc(ApiContext& ctx, Exchange& ex, const SandboxTarget& target, connect::Protocol protocol);

  ApiContext& ctx;
  Exchange& ex;
  const SandboxTarget& target;
  const connect::Protocol protocol;
  const connect::Codec codec;
  EnvdUser user;
  // Connect-Timeout-Ms, when the client gave one.
  std::optional<int64_t> timeout_ms;
  // When the call must be over (MonotonicNowMs), or nullopt.
  std::optional<int64_t> deadline_ms;
  // The Keepalive-Ping-Interval the client asked for, in ms (E2B's SDKs
  // ask for 50 s); a stream with nothing to say sends a KeepAlive this often.
  int64_t keepalive_ms = 30000;

  io::SandboxIo Io();
  // The call's one request message (unary and server-streaming calls):
  // the whole body under connect::kMaxMessageBytes, bare or in its
  // envelope. Throws ApiError invalid_request naming what is wrong.
  void ReadRequest(google::protobuf::Message* message);
  // For client streams: the next request envelope as it arrives; false at
  // the body's end. Throws ApiError on a malformed envelope.
  bool NextRequest(google::protobuf::Message* message);
  // The answer of a unary or client-streaming call.
  void Reply(const google::protobuf::Message& message);
  // Server streams: one message (the stream begins with the first); false
  // once the client is gone.
  bool Send(const google::protobuf::Message& message);
  // Ends a stream with `status` in its end-stream envelope.
  void End(const Status& status);
  bool stream_begun() const { return begun_; }
  // Whether the deadline passed.
  bool Expired() const;

 private:
  bool Begin();

  connect::EnvelopeReader reader_;
  bool body_done_ = false;
  bool begun_ = false;
};

// The services, by method name ("Start"); false if there is no such method.
bool ServeProcessRpc(Rpc& rpc, std::string_view method);
bool ServeFilesystemRpc(Rpc& rpc, std::string_view method);
// Whether a method streams its answer (for errors before a stream began).
bool IsServerStreaming(std::string_view path);
// GET and POST /files.
void ServeFiles(ApiContext& ctx, Exchange& ex, const SandboxTarget& target);

}  // namespace kiln::api::e2b
