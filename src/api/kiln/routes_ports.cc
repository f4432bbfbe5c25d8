// Reaching a server inside a sandbox (issue 28): HTTP by path
// (/v1/sandboxes/{id}/ports/{port}/...), HTTP by host name
// ({port}-{id}.{domain}, with a key or a preview's token) and raw TCP over
// the tunnel WebSocket (the reference's framing). Every connection is a
// port.dial through the agent (io::SandboxIo::DialPort) and holds one of
// the sandbox's port-connection slots while it is open.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "api/errors.h"
#include "api/kiln/requests.h"
#include "api/kiln/routes.h"
#include "api/kiln/terminal.h"
#include "common/time.h"

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

// ---- The tunnel: one WebSocket, many TCP streams ----

// Frames: a kind byte, a 32-bit big-endian stream number, the payload.
constexpr char kOpen = 'o', kData = 'd', kEnd = 'e', kClose = 'c', kAck = 'a';
// What a client may send past the last credit (the reference's window).
constexpr uint64_t kTunnelWindow = 1 << 20;
// Credit is sent once this much was passed on since the last, or when the
// stream's queue is empty.
constexpr uint64_t kAckBatch = 64 * 1024;

std::string Frame(char kind, uint32_t stream, std::string_view payload = {}) {
  std::string f(5 + payload.size(), '\0');
  f[0] = kind;
  for (int i = 0; i < 4; ++i) f[1 + i] = static_cast<char>((stream >> (24 - 8 * i)) & 0xff);
  std::copy(payload.begin(), payload.end(), f.begin() + 5);
  return f;
}

class TunnelSession {
 public:
  TunnelSession(ApiContext& ctx, std::shared_ptr<control::Sandbox> sandbox, io::SandboxIo io,
                WebSocket& ws, std::optional<int> only_port)
      : ctx_(ctx), sandbox_(std::move(sandbox)), io_(std::move(io)), ws_(ws), only_(only_port) {}

  void Run() {
    ws_.Send(json{{"type", "ready"}}.dump(), false);
    ws_.Run([this](std::string_view data, bool binary) { OnMessage(data, binary); });
    std::vector<std::shared_ptr<Stream>> all;
    {
      std::lock_guard lock(mu_);
      closing_ = true;
      for (auto& [id, s] : streams_) all.push_back(s);
      streams_.clear();
      for (auto& s : ended_) all.push_back(s);
      ended_.clear();
    }
    for (auto& s : all) s->Stop();
    for (auto& s : all) s->Join();
  }

 private:
  // One TCP connection of the tunnel: a thread dials and then reads the
  // server's bytes; another writes the client's, so a full window on one
  // stream holds up no other.
  struct Stream {
    uint32_t id = 0;
    std::shared_ptr<void> slot;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::string> inbox;  // client bytes; "" + end marks the end
    bool input_ended = false, stopped = false;
    std::optional<io::PortConnection> conn;
    std::thread reader, writer;
    std::atomic<int> running{0};  // its threads still running
    void Stop() {
      std::lock_guard lock(mu);
      stopped = true;
      if (conn) conn->Cancel();
      cv.notify_all();
    }
    void Join() {
      if (reader.joinable()) reader.join();
      if (writer.joinable()) writer.join();
    }
  };

  void OnMessage(std::string_view data, bool binary) {
    if (!binary) return;  // the client sends no text frames
    if (data.size() < 5) return Fail("tunnel frames are a kind byte, a stream number, a payload");
    char kind = data[0];
    uint32_t id = 0;
    for (int i = 1; i <= 4; ++i) id = (id << 8) | static_cast<unsigned char>(data[i]);
    std::string_view payload = data.substr(5);
    if (kind == kOpen) return Open(id, payload);
    std::shared_ptr<Stream> s = Find(id);
    if (!s) return;  // closed meanwhile
    if (kind == kData) {
      received_ += payload.size();
      if (received_ - acked_ > kTunnelWindow + kAckBatch)
        return Fail("the client sent more than its window of " + std::to_string(kTunnelWindow) +
                    " bytes past the last credit");
      std::lock_guard lock(s->mu);
      s->inbox.emplace_back(payload);
      s->cv.notify_all();
    } else if (kind == kEnd) {
      std::lock_guard lock(s->mu);
      s->input_ended = true;
      s->cv.notify_all();
    } else if (kind == kClose) {
      s->Stop();
      Remove(id);
    }
  }

  void Open(uint32_t id, std::string_view payload) {
    int port = 0;
    if (payload.starts_with("tcp ")) {
      port = ParsePort(payload.substr(4)).value_or(0);
    } else if (payload.empty() && only_) {
      port = *only_;
    }
    if (port == 0) {
      ws_.Send(Frame(kClose, id, "invalid: open with \"tcp PORT\", PORT 1-65535"), true);
      return;
    }
    if (only_ && port != *only_) {
      ws_.Send(Frame(kClose, id, "refused: this tunnel is for port " + std::to_string(*only_)),
               true);
      return;
    }
    JoinEnded();
    auto s = std::make_shared<Stream>();
    s->id = id;
    try {
      s->slot = OpenPortConnection(ctx_, *sandbox_);
    } catch (const ApiError& e) {
      ws_.Send(Frame(kClose, id, "refused: " + e.status().message()), true);
      return;
    }
    {
      std::lock_guard lock(mu_);
      if (closing_ || streams_.count(id)) {
        ws_.Send(Frame(kClose, id, "refused: stream number in use"), true);
        return;
      }
      streams_[id] = s;
    }
    s->running = 1;
    s->reader = std::thread([this, s, port] {
      ReadServer(s, port);
      --s->running;
    });
  }

  void ReadServer(std::shared_ptr<Stream> s, int port) {
    auto conn = io_.DialPort(port, kPortDialMs);
    {
      std::lock_guard lock(s->mu);
      if (conn.ok() && !s->stopped) s->conn.emplace(std::move(*conn));
    }
    if (!s->conn) {
      std::string why = conn.ok() ? "closed"
                        : conn.status().code() == Code::kPortClosed
                            ? "closed"
                            : std::string(CodeName(conn.status().code()));
      ws_.Send(Frame(kClose, s->id, why), true);
      s->slot.reset();
      Remove(s->id);
      return;
    }
    ws_.Send(Frame(kOpen, s->id), true);
    ++s->running;
    s->writer = std::thread([this, s] {
      WriteServer(s);
      --s->running;
    });
    std::string data;
    bool end = false;
    while (s->conn->Receive(&data, &end, -1) == io::PortConnection::Got::kData) {
      if (!data.empty() && !ws_.Send(Frame(kData, s->id, data), true)) break;
      if (end) ws_.Send(Frame(kEnd, s->id), true);
    }
    ws_.Send(Frame(kClose, s->id, "closed"), true);
    s->Stop();
    s->slot.reset();  // the connection is over, whoever joins the threads later
    Remove(s->id);
  }

  void WriteServer(std::shared_ptr<Stream> s) {
    for (;;) {
      std::string piece;
      bool end = false;
      {
        std::unique_lock lock(s->mu);
        s->cv.wait(lock, [&] { return s->stopped || !s->inbox.empty() || s->input_ended; });
        if (s->stopped) return;
        if (!s->inbox.empty()) {
          piece = std::move(s->inbox.front());
          s->inbox.pop_front();
        } else {
          end = true;
        }
      }
      if (end) {
        s->conn->Send("", true);
        return;
      }
      if (!s->conn->Send(piece)) return;
      Credit(piece.size());
    }
  }

  // Tells the client how much it may send again.
  void Credit(uint64_t bytes) {
    std::lock_guard lock(credit_mu_);
    uint64_t total = consumed_ += bytes;
    // In batches, and whenever all that came was passed on.
    if (total - acked_ < kAckBatch && received_.load() != total) return;
    acked_ = total;
    std::string count(8, '\0');
    for (int i = 0; i < 8; ++i) count[i] = static_cast<char>((total >> (56 - 8 * i)) & 0xff);
    ws_.Send(Frame(kAck, 0, count), true);
  }

  std::shared_ptr<Stream> Find(uint32_t id) {
    std::lock_guard lock(mu_);
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second;
  }
  // A stream leaves the table; its threads are joined once they ended.
  void Remove(uint32_t id) {
    std::lock_guard lock(mu_);
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    ended_.push_back(std::move(it->second));
    streams_.erase(it);
  }
  void JoinEnded() {
    std::vector<std::shared_ptr<Stream>> done;
    {
      std::lock_guard lock(mu_);
      auto finished = [](const std::shared_ptr<Stream>& s) { return s->running == 0; };
      for (auto& s : ended_)
        if (finished(s)) done.push_back(s);
      std::erase_if(ended_, finished);
    }
    for (auto& s : done) s->Join();
  }

  void Fail(const std::string& message) {
    ws_.Send(TerminalErrorFrame(Status(Code::kInvalidRequest, message)), false);
    ws_.Close(1008, "invalid_request");
  }

  ApiContext& ctx_;
  std::shared_ptr<control::Sandbox> sandbox_;
  io::SandboxIo io_;
  WebSocket& ws_;
  std::optional<int> only_;
  std::mutex mu_;
  bool closing_ = false;
  std::map<uint32_t, std::shared_ptr<Stream>> streams_;
  std::vector<std::shared_ptr<Stream>> ended_;  // removed, threads maybe running
  std::atomic<uint64_t> received_{0};           // client bytes received, in all
  std::mutex credit_mu_;
  std::atomic<uint64_t> consumed_{0}, acked_{0};
};

}  // namespace

void AddPortRoutes(Router& r, ApiContext& ctx) {
  // HTTP to a port, by path: the rest of the path and the query are what
  // the server sees.
  auto by_path = [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    int port = ReadPortParam(ex);
    io::SandboxIo io = RunningIo(ctx, ex, *s);
    auto slot = OpenPortConnection(ctx, *s);
    ProxyRequest req;
    req.port = port;
    req.target = TargetAfterSegments(ex.raw_target(), 5);
    req.drop_headers = {"authorization"};  // the key the route was reached with
    req.idle_ms = ctx.ports.relay_idle_ms;
    req.forwarded_prefix = "/v1/sandboxes/" + s->id() + "/ports/" + std::to_string(port);
    req.registry = ctx.relays;
    req.registry_key = RelayKey(s->id(), port);
    ProxyHttp(ex, io, req);
  };
  r.Add("*", "/v1/sandboxes/{id}/ports/{port}", by_path);
  r.Add("*", "/v1/sandboxes/{id}/ports/{port}/{path...}", by_path);

  r.Add("GET", "/v1/sandboxes/{id}/tunnel", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);  // another key's sandbox is 404 before anything
    if (!IsWebSocketUpgrade(ex.Header("Upgrade"), ex.Header("Connection")))
      throw ApiError(Code::kInvalidRequest,
                     "the tunnel is a WebSocket: send Upgrade: websocket and Connection: Upgrade");
    std::optional<int> only;
    if (auto p = ex.Query("port")) {
      only = ParsePort(*p);
      if (!only) throw InvalidField("query.port", "must be a port number from 1 to 65535");
    }
    io::SandboxIo io = RunningIo(ctx, ex, *s);
    auto stream_slot = OpenStream(ctx, *s);
    std::unique_ptr<WebSocket> ws = ex.UpgradeToWebSocket();
    if (!ws) return;
    TunnelSession(ctx, s, std::move(io), *ws, only).Run();
  });
}

}  // namespace kiln::api::v1
