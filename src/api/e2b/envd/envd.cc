// envd (port 49983) of E2B's sandboxes, served by kilnd itself over kiln's
// io services: nothing runs in the sandbox for it. Connect RPC for
// process.Process (process.cc) and filesystem.Filesystem (filesystem.cc),
// GET/POST /files (files.cc), GET /health; anything else is a 404 in E2B's
// shape.
#include <algorithm>
#include <string_view>
#include <vector>

#include "api/e2b/e2b.h"
#include "api/e2b/envd/connect.h"
#include "api/e2b/envd/rpc.h"
#include "api/e2b/routes.h"
#include "api/e2b/sandbox_plane.h"
#include "api/errors.h"
#include "common/base64.h"
#include "common/contract.h"
#include "common/time.h"

namespace kiln::api::e2b {
namespace {

constexpr std::string_view kProcessPrefix = "/process.Process/";
constexpr std::string_view kFilesystemPrefix = "/filesystem.Filesystem/";
// How long past its Connect-Timeout-Ms a call may run: the SDK gives up at
// the deadline itself; this is slack for the last answer to reach it.
constexpr int64_t kDeadlineGraceMs = 2000;

bool IsRpcPath(std::string_view path) {
  return path.starts_with(kProcessPrefix) || path.starts_with(kFilesystemPrefix);
}

}  // namespace

std::string E2bHomeOf(const RunAs& run_as) {
  return run_as.home == RunAs{}.home ? kE2bHome : run_as.home;
}

EnvdUser UserFromName(const std::string& name, const control::Sandbox& sandbox) {
  EnvdUser user;
  user.home = E2bHomeOf(sandbox.spec().run_as);
  if (name.empty() || name == "user") return user;
  if (name == "root") {
    user.as_root = true;
    user.home = "/root";
    return user;
  }
  throw ApiError(Code::kInvalidRequest,
                 "user '" + name.substr(0, 64) +
                     "' does not exist in kiln's sandboxes: use 'user' (the sandbox's own "
                     "user) or 'root'");
}

EnvdUser UserOf(const Exchange& ex, const control::Sandbox& sandbox) {
  std::string auth = ex.Header("Authorization");
  static constexpr std::string_view kBasic = "Basic ";
  if (!auth.starts_with(kBasic) || auth.size() > 1024) return UserFromName("", sandbox);
  auto decoded = Base64Decode(std::string_view(auth).substr(kBasic.size()));
  if (!decoded)
    throw ApiError(Code::kInvalidRequest, "the Authorization header's Basic value is not base64");
  return UserFromName(decoded->substr(0, decoded->find(':')), sandbox);
}

std::string CleanPath(const std::string& absolute) {
  std::vector<std::string_view> parts;
  std::string_view rest = absolute;
  while (!rest.empty()) {
    size_t slash = rest.find('/');
    std::string_view part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
  }
  std::string out;
  for (std::string_view part : parts) (out += '/') += part;
  return out.empty() ? "/" : out;
}

std::string ResolvePath(const EnvdUser& user, const std::string& path, const char* field) {
  if (path.empty()) throw InvalidField(field, "is required: a path in the sandbox");
  if (path.size() > contract::kPathMax)
    throw InvalidField(field, "is longer than " + std::to_string(contract::kPathMax) + " bytes");
  if (path.find('\0') != std::string::npos) throw InvalidField(field, "contains a NUL byte");
  std::string out;
  if (path == "~" || path.starts_with("~/"))
    out = user.home + path.substr(1);
  else if (path[0] != '/')
    out = user.home + "/" + path;
  else
    out = path;
  return CleanPath(out);
}

Rpc::Rpc(ApiContext& c, Exchange& e, const SandboxTarget& t, connect::Protocol p)
    : ctx(c), ex(e), target(t), protocol(p), codec(p.json) {
  user = UserOf(ex, *t.sandbox);
  auto timeout = connect::ParseTimeoutMs(ex.Header("Connect-Timeout-Ms"));
  if (!timeout.ok()) throw ApiError(timeout.status());
  timeout_ms = *timeout;
  if (timeout_ms && *timeout_ms > 0) deadline_ms = MonotonicNowMs() + *timeout_ms;
  std::string ping = ex.Header("Keepalive-Ping-Interval");
  if (!ping.empty() && ping.size() <= 4 &&
      std::all_of(ping.begin(), ping.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    keepalive_ms = std::clamp<int64_t>(std::stoll(ping), 1, 300) * 1000;
}

io::SandboxIo Rpc::Io() { return RunningIo(ctx, ex, *target.sandbox); }

bool Rpc::Expired() const {
  return deadline_ms && MonotonicNowMs() > *deadline_ms + kDeadlineGraceMs;
}

void Rpc::ReadRequest(google::protobuf::Message* message) {
  const std::string type = message->GetDescriptor()->full_name();
  std::string body, chunk;
  const size_t cap = connect::kMaxMessageBytes + 5;
  while (ex.ReadBodyChunk(&chunk)) {
    if (body.size() + chunk.size() > cap)
      throw ApiError(Code::kPayloadTooLarge, "the " + type + " is over the limit of " +
                                                 std::to_string(connect::kMaxMessageBytes) +
                                                 " bytes");
    body += chunk;
  }
  if (ex.body_error()) throw ApiError(Code::kInvalidRequest, "the request body broke off");
  if (!protocol.streaming) {
    ThrowIfError(codec.Decode(body, message));
    return;
  }
  // A server stream's request is one envelope and nothing after it.
  connect::EnvelopeReader reader;
  ThrowIfError(reader.Feed(body));
  uint8_t flags = 0;
  std::string bytes;
  Status error;
  switch (reader.Next(&flags, &bytes, &error)) {
    case connect::EnvelopeReader::Got::kError:
      throw ApiError(error);
    case connect::EnvelopeReader::Got::kNeedMore:
      throw ApiError(Code::kInvalidRequest,
                     body.empty() ? "the request has no envelope: it must hold one " + type
                                  : "the request's envelope is cut short (" +
                                        std::to_string(body.size()) + " bytes came)");
    case connect::EnvelopeReader::Got::kMessage:
      break;
  }
  if (flags & connect::kFlagEndStream)
    throw ApiError(Code::kInvalidRequest,
                   "the request's envelope is flagged end-stream: it "
                   "must be a message envelope holding one " +
                       type);
  uint8_t more_flags = 0;
  std::string more;
  if (reader.Next(&more_flags, &more, &error) != connect::EnvelopeReader::Got::kNeedMore ||
      !reader.Finish().ok())
    throw ApiError(Code::kInvalidRequest,
                   "the request holds more than one envelope: it must hold one " + type);
  ThrowIfError(codec.Decode(bytes, message));
}

bool Rpc::NextRequest(google::protobuf::Message* message) {
  std::string chunk;
  for (;;) {
    uint8_t flags = 0;
    std::string bytes;
    Status error;
    switch (reader_.Next(&flags, &bytes, &error)) {
      case connect::EnvelopeReader::Got::kError:
        throw ApiError(error);
      case connect::EnvelopeReader::Got::kMessage:
        if (flags & connect::kFlagEndStream)
          throw ApiError(Code::kInvalidRequest,
                         "a request stream holds message envelopes only, not an end-stream one");
        message->Clear();
        ThrowIfError(codec.Decode(bytes, message));
        return true;
      case connect::EnvelopeReader::Got::kNeedMore:
        break;
    }
    if (body_done_) {
      ThrowIfError(reader_.Finish());
      return false;
    }
    if (!ex.ReadBodyChunk(&chunk)) {
      if (ex.body_error()) throw ApiError(Code::kInvalidRequest, "the request stream broke off");
      body_done_ = true;
      continue;
    }
    ThrowIfError(reader_.Feed(chunk));
  }
}

bool Rpc::Begin() {
  if (begun_) return true;
  begun_ = true;
  return ex.BeginStream(200, protocol.ContentType());
}

void Rpc::Reply(const google::protobuf::Message& message) {
  if (!protocol.streaming) return ex.SendBytes(200, codec.Encode(message), protocol.ContentType());
  if (Send(message)) End(Status::Ok());
}

bool Rpc::Send(const google::protobuf::Message& message) {
  if (!Begin()) return false;
  return ex.WriteChunk(connect::Envelope(0, codec.Encode(message)));
}

void Rpc::End(const Status& status) {
  if (!Begin()) return;
  if (ex.WriteChunk(connect::Envelope(connect::kFlagEndStream, connect::EndStreamJson(status))))
    ex.EndStream();
}

bool IsServerStreaming(std::string_view path) {
  return path == "/process.Process/Start" || path == "/process.Process/Connect" ||
         path == "/process.Process/StreamInput" || path == "/filesystem.Filesystem/WatchDir";
}

void ServeEnvd(ApiContext& ctx, Exchange& ex, const SandboxTarget& t) {
  const std::string& path = t.path;
  if (path == "/health") {
    if (ex.method() != "GET" && ex.method() != "HEAD")
      throw ApiError(Code::kMethodNotAllowed, "envd's /health takes GET");
    // The SDKs' is_running() reads 502 as "not running": a sandbox paused
    // (unless autoResume wakes it, as any traffic would) or stopped. "was
    // not found" is the words of E2B's proxy the SDKs look for: with them a
    // call cut by a kill is told apart from a network fault.
    if (t.sandbox->state() != control::SandboxState::kRunning) {
      bool woke = false;
      if (t.sandbox->spec().auto_wake && E2bStateName(t.sandbox->state())) {
        try {
          RunningIo(ctx, ex, *t.sandbox);
          woke = true;
        } catch (const ApiError&) {
        }
      }
      if (!woke)
        return ex.SendJson(
            502,
            nlohmann::json{{"code", 502},
                           {"message", "sandbox " + t.sandbox->id() +
                                           " was not found running: it is paused or stopped"}});
    }
    return ex.SendBytes(204, "", "text/plain");
  }
  if (path == "/files") return ServeFiles(ctx, ex, t);
  if (!IsRpcPath(path)) throw ApiError(Code::kRouteNotFound, "envd has no " + path);
  if (ex.method() != "POST")
    throw ApiError(Code::kMethodNotAllowed, "envd's Connect methods take POST, not " + ex.method());
  auto protocol = connect::ParseContentType(ex.Header("Content-Type"));
  if (!protocol)
    throw ApiError(Code::kInvalidRequest,
                   "Content-Type '" + ex.Header("Content-Type").substr(0, 64) +
                       "' is not Connect's: application/proto, application/json, "
                       "application/connect+proto or application/connect+json");
  std::string encoding =
      ex.Header(protocol->streaming ? "Connect-Content-Encoding" : "Content-Encoding");
  if (!connect::IdentityEncoding(encoding))
    throw ApiError(Code::kNotSupported,
                   "compression '" + encoding.substr(0, 32) + "' is not supported: send identity");
  Rpc rpc(ctx, ex, t, *protocol);
  try {
    bool known =
        path.starts_with(kProcessPrefix)
            ? ServeProcessRpc(rpc, std::string_view(path).substr(kProcessPrefix.size()))
            : ServeFilesystemRpc(rpc, std::string_view(path).substr(kFilesystemPrefix.size()));
    if (!known) throw ApiError(Code::kNotSupported, "envd has no method " + path);
  } catch (const ApiError& e) {
    // A stream that began ends with the error in its last envelope.
    if (!rpc.stream_begun()) throw;
    rpc.End(e.status());
  }
}

void SendEnvdError(Exchange& ex, const std::string& path, const Status& s) {
  if (ex.responded()) return;
  if (!IsRpcPath(path)) return SendError(ex, s);
  auto protocol = connect::ParseContentType(ex.Header("Content-Type"));
  bool streaming = protocol ? protocol->streaming : IsServerStreaming(path);
  if (!streaming)
    return ex.SendBytes(connect::HttpStatusOf(connect::ConnectCode(s.code())),
                        connect::ErrorJson(s), "application/json");
  // Streaming clients read errors from the end-stream envelope of a 200;
  // a non-200 would lose the message.
  connect::Protocol p = protocol.value_or(connect::Protocol{true, true});
  if (!ex.BeginStream(200, p.ContentType())) return;
  if (ex.WriteChunk(connect::Envelope(connect::kFlagEndStream, connect::EndStreamJson(s))))
    ex.EndStream();
}

}  // namespace kiln::api::e2b
