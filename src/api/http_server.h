// kilnd's HTTP/1.1 server (Boost.Beast). A request runs on a thread of its
// own, synchronously: threads keep handlers simple -- an exec handler just
// blocks on its sandbox's answer -- and one slow command never holds up
// another. Everything before that is asynchronous on one I/O thread: an
// idle keep-alive connection, a request's headers and the start of its
// body cost a socket and a few KiB, never a thread, and each has a
// deadline, so slow or silent clients (slowloris) hold nobody up and are
// let go.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::api {

class Connection;

// A WebSocket (RFC 6455) that an HTTP request was upgraded to: messages
// both ways until either side closes. Run serves it on the connection's
// thread; Send and Close may be called from any thread meanwhile (they
// queue onto it), so a handler can read with one thread and write with
// another without the two touching the socket at once.
class WebSocket {
 public:
  virtual ~WebSocket() = default;
  // Reads until the connection ends (a close from either side, or an
  // error), handing each message to `on_message` on this thread; queued
  // writes go out meanwhile.
  virtual void Run(const std::function<void(std::string_view data, bool binary)>& on_message) = 0;
  // Queues one message. Blocks while more than 1 MiB is queued (a slow
  // client slows the sender), up to the server's request timeout; past it,
  // or past 1 MiB when called from on_message (a reply), the client is cut.
  // False once the connection has ended.
  virtual bool Send(std::string data, bool binary) = 0;
  // Sends a close frame after what is queued; Run returns once the client
  // answers it (or after 30 s).
  virtual void Close(uint16_t code, const std::string& reason) = 0;
};

// A client's connection as plain bytes, for a handler that relays them
// itself (a sandbox's port): it writes the whole answer, head included, and
// the connection closes when the exchange ends. Read on one thread, Write
// on another, Shutdown from any.
class RawConnection {
 public:
  enum class Got { kData, kTimeout, kEnded };
  virtual ~RawConnection() = default;
  // What the client sent after the request, up to 64 KiB a call. Read the
  // body through the exchange (ReadBodyChunk) first.
  virtual Got Read(std::string* out, int timeout_ms) = 0;
  // All of `data`; false once the client is gone or took no byte for the
  // server's request timeout.
  virtual bool Write(std::string_view data) = 0;
  // Both directions end: a Read waiting elsewhere returns kEnded.
  virtual void Shutdown() = 0;
};

// One request and its response, as a handler sees them.
class Exchange {
 public:
  virtual ~Exchange() = default;

  virtual const std::string& method() const = 0;
  virtual const std::string& path() const = 0;
  virtual std::optional<std::string> Query(const std::string& name) const = 0;
  virtual std::vector<std::string> QueryAll(const std::string& name) const = 0;
  virtual std::string Header(const std::string& name) const = 0;
  // Every header as it came, in order (a relay passes them on).
  virtual std::vector<std::pair<std::string, std::string>> Headers() const { return {}; }
  virtual const std::string& request_id() const = 0;
  virtual std::optional<uint64_t> content_length() const = 0;
  // The client's IP address ("" when unknown, as in tests).
  virtual std::string peer_address() const { return ""; }

  // The whole body as JSON ({} when empty). Throws ApiError on bad JSON or
  // a body over max_bytes. Read once, then the same value again.
  virtual nlohmann::json JsonBody(size_t max_bytes = 8 << 20) = 0;
  // Streams the raw body; false at its end (or on a broken connection,
  // then body_error() is true).
  virtual bool ReadBodyChunk(std::string* out) = 0;
  virtual bool body_error() const = 0;

  virtual void SendJson(int status, const nlohmann::json& body) = 0;
  virtual void SendBytes(int status, std::string_view body, const std::string& content_type,
                         const std::vector<std::pair<std::string, std::string>>& headers = {}) = 0;
  // Chunked streaming answer. Write* return false once the client is gone.
  virtual bool BeginStream(
      int status, const std::string& content_type,
      const std::vector<std::pair<std::string, std::string>>& headers = {}) = 0;
  virtual bool WriteChunk(std::string_view data) = 0;
  virtual void EndStream() = 0;
  // Ends the connection without the last chunk: the client sees a broken
  // transfer rather than a short one.
  virtual void AbortStream() = 0;
  virtual bool responded() const = 0;
  // True once the client has closed its end (it will never read an answer).
  virtual bool ClientGone() = 0;

  // Answers the request's WebSocket handshake (101 Switching Protocols) and
  // hands over the connection; it is not used for HTTP again. Null when
  // the handshake failed (nothing can be answered) or this exchange cannot
  // upgrade (a test's).
  virtual std::unique_ptr<WebSocket> UpgradeToWebSocket() { return nullptr; }
  // Hands the connection over as bytes (see RawConnection); the exchange
  // counts as answered with `status` for logs and metrics. Null when this
  // exchange cannot (a test's) or has answered.
  virtual std::unique_ptr<RawConnection> TakeRaw(int /*status*/) { return nullptr; }
  // The status a relayed answer turned out to have (for logs and metrics).
  virtual void NoteStatus(int /*status*/) {}
  // The request target as it came, undecoded ("/a%20b?x=1").
  virtual std::string raw_target() const { return path(); }

  // The status answered (0 before), and the body of a JSON answer (null
  // for bytes and streams): what the idempotency layer stores.
  virtual int status() const { return 0; }
  virtual const std::string* sent_json() const { return nullptr; }

  // Runs once, just before the first byte of the answer is written, with
  // its status and the body of a JSON answer (null for bytes and streams).
  // The idempotency layer settles its record here: a client that acts on an
  // answer (and retries) must find the record already settled.
  std::function<void(int status, const std::string* json)> before_answer;

  std::map<std::string, std::string> params;  // path parameters, from the router
  // Added to whatever answer is sent (Retry-After, Idempotency-Replayed).
  std::vector<std::pair<std::string, std::string>> extra_headers;
  // Held while the exchange lives: the sandbox it acts on counts as in use
  // (idle pause) until the answer, stream or terminal ends.
  std::shared_ptr<void> activity;

 protected:
  void RunBeforeAnswer(int status, const std::string* json) {
    if (!before_answer) return;
    auto hook = std::move(before_answer);
    before_answer = nullptr;
    hook(status, json);
  }
};

using Handler = std::function<void(Exchange&)>;

// How long a client may take, and how many connections it may hold.
struct ServerLimits {
  // A request's headers, and the first 64 KiB of its body (all of a JSON
  // body), must arrive within this of its first byte (a new connection's
  // first byte within this of the connect), else 408 request_timeout and
  // the connection is closed. Past that a body must keep coming: no byte
  // for this long ends it the same way.
  int request_timeout_s = 30;
  // A keep-alive connection with no request for this long is closed.
  int idle_timeout_s = 60;
  // Open connections, idle or busy; past it new ones get 503 server_busy.
  int max_connections = 16384;
  // Open connections from one client address; past it that address's new
  // ones get 503 server_busy, and every other address still gets in.
  int max_connections_per_address = 2048;
  // A WebSocket from which nothing (not even a pong to kilnd's ping at half
  // this) arrives for this long is closed.
  int websocket_idle_s = 60;
};

class HttpServer {
 public:
  // `listen` is host:port.
  HttpServer(const std::string& listen, Handler handler, ServerLimits limits = {});
  ~HttpServer();
  // Binds the listening socket; throws on a bind failure. Connections wait
  // in the backlog until Run.
  void Listen();
  // Serves until Stop() (binding first if Listen was not called).
  void Run();
  // Stops accepting; Run returns. Safe from any thread, any number of times.
  void Stop();
  // After Run returned: ends idle connections and waits up to timeout_ms
  // for the ones still handling a request. False if some remain.
  bool Drain(int timeout_ms);

  // Connections open now (idle ones included), and those running a request.
  int connections() const;
  int active_requests() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::api
