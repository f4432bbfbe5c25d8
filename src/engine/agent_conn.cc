#include "engine/agent_conn.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <system_error>

#include "common/ids.h"
#include "common/json_bounded.h"
#include "common/log.h"
#include "common/time.h"
#include "proto/frame.h"

namespace kiln::engine {

using nlohmann::json;
using proto::FrameType;

AgentOp::~AgentOp() {
  if (!answered_) Cancel();
  conn_->Unregister(stream_);
}

void AgentOp::Push(Message m, uint64_t cost) {
  std::lock_guard lock(mu_);
  if (m.kind == Message::kResponse || m.kind == Message::kClosed) answered_ = true;
  queue_.push_back({std::move(m), cost});
  cv_.notify_all();
}

bool AgentOp::Next(Message* m, int timeout_ms) {
  std::unique_lock lock(mu_);
  auto ready = [&] { return !queue_.empty(); };
  if (timeout_ms < 0) {
    cv_.wait(lock, ready);
  } else if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
    lock.unlock();
    conn_->Silent();
    return false;
  }
  *m = std::move(queue_.front().first);
  queued_ -= std::min(queued_, queue_.front().second);
  queue_.pop_front();
  return true;
}

bool AgentOp::SendData(uint8_t channel, std::string_view data, bool end) {
  do {
    size_t n = std::min(data.size(), proto::kMaxDaemonPayload);
    bool last = n == data.size();
    uint8_t flags = (last && end) ? proto::kFlagEnd : 0;
    if (!conn_->WriteFrame(
            proto::EncodeFrame(FrameType::kData, stream_, data.substr(0, n), flags, channel)))
      return false;
    data.remove_prefix(n);
  } while (!data.empty());
  return true;
}

bool AgentOp::SendDataWindowed(uint8_t channel, std::string_view data, bool end) {
  do {
    size_t n;
    {
      std::unique_lock lock(mu_);
      // An agent that grants no credit (root inside can stop it, or
      // impersonate it and never read) does not hold the sender for good.
      if (!cv_.wait_for(lock, std::chrono::milliseconds(AgentConnection::kWindowWaitMs),
                        [&] { return answered_ || credit_ > 0 || data.empty(); })) {
        lock.unlock();
        Cancel();
        return false;
      }
      if (answered_) return false;
      n = std::min<uint64_t>(data.size(), credit_);
      credit_ -= n;
    }
    if (!SendData(channel, data.substr(0, n), end && n == data.size())) return false;
    data.remove_prefix(n);
  } while (!data.empty());
  return true;
}

void AgentOp::AddCredit(uint32_t bytes) {
  std::lock_guard lock(mu_);
  credit_ += bytes;
  cv_.notify_all();
}

void AgentOp::Ack(uint32_t bytes) {
  if (bytes == 0) return;
  {
    std::lock_guard lock(mu_);
    unacked_ -= std::min<uint64_t>(unacked_, bytes);
  }
  conn_->WriteFrame(proto::EncodeWindow(stream_, bytes));
}

void AgentOp::Cancel() {
  {
    std::lock_guard lock(mu_);
    if (answered_) return;
    answered_ = true;
    // Whoever waits in Next() or SendDataWindowed() learns the op is over.
    queue_.push_back({Message{Message::kClosed}, 0});
    cv_.notify_all();
  }
  conn_->WriteFrame(proto::EncodeFrame(FrameType::kCancel, stream_, ""));
}

Result<std::shared_ptr<AgentConnection>> AgentConnection::Connect(const std::string& in_fifo,
                                                                  const std::string& out_fifo,
                                                                  int timeout_ms,
                                                                  const std::string& label) {
  auto fail = [](std::string message) { return Status(Code::kStartupFailed, std::move(message)); };
  std::shared_ptr<AgentConnection> c(new AgentConnection());
  c->label_ = label;
  // Non-blocking opens never hang: the sandbox holds both FIFOs open.
  c->in_.reset(::open(in_fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  c->out_.reset(::open(out_fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!c->in_ || !c->out_) {
    return fail("cannot open the agent channel: " + std::string(strerror(errno)));
  }
  // Non-blocking writes, each frame <= PIPE_BUF so whole or not at all,
  // waited for with a deadline (WriteFrame); room for bursts.
  fcntl(c->in_.get(), F_SETPIPE_SZ, 1 << 20);
  fcntl(c->out_.get(), F_SETPIPE_SZ, 1 << 20);
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) < 0) {
    return fail("pipe: " + std::string(strerror(errno)));
  }
  c->wake_r_.reset(wake[0]);
  c->wake_w_.reset(wake[1]);

  uint64_t nonce = RandomU64();
  if (!c->WriteFrame(proto::EncodeFrame(FrameType::kHello, 0, json{{"nonce", nonce}}.dump()))) {
    return fail("cannot write to the agent channel");
  }
  // Skip whatever an earlier session left in the FIFO, up to our marker.
  proto::FrameDecoder dec(proto::kMaxAgentPayload);
  int64_t deadline = MonotonicNowMs() + timeout_ms;
  bool synced = false;
  char buf[65536];
  while (!synced) {
    int64_t left = deadline - MonotonicNowMs();
    if (left <= 0) {
      return fail("the agent did not answer within " + std::to_string(timeout_ms) + " ms");
    }
    pollfd p{c->out_.get(), POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    ssize_t n = ::read(c->out_.get(), buf, sizeof buf);
    if (n == 0) {
      return fail("the sandbox closed the agent channel");
    }
    if (n < 0) continue;
    dec.Feed(std::string_view(buf, static_cast<size_t>(n)));
    synced = dec.SkipToSync(nonce);
  }
  // The hello's answer (stream 0) follows the marker; keep all bytes after
  // the marker for the reader thread.
  while (auto f = dec.Next()) {
    if (f->stream == 0 && f->type == FrameType::kResponse) continue;
    c->initial_ += proto::EncodeFrame(f->type, f->stream, f->payload, f->flags, f->channel);
  }
  try {
    c->reader_ = std::thread([raw = c.get()] { raw->ReadLoop(); });
  } catch (const std::system_error& e) {
    return fail(std::string("no thread for the agent channel: ") + e.what());
  }
  return c;
}

AgentConnection::~AgentConnection() { Close(); }

void AgentConnection::Silent() {
  if (!on_silence_ || !alive_) return;
  int64_t now = MonotonicNowMs();
  // A waiter polling a quiet command (exec checks its client every 250 ms)
  // is not news while the agent spoke recently.
  if (now - last_heard_ms_.load() < kSilenceEvery) return;
  int64_t last = last_silence_ms_.load();
  if (now - last < kSilenceEvery || !last_silence_ms_.compare_exchange_strong(last, now)) return;
  // A quiet agent may just have nothing to say: ask it first (a ping costs
  // a frame; the engine's remedy costs a process).
  try {
    std::thread([self = shared_from_this()] {
      auto ping = self->Start(nlohmann::json{{"op", "ping"}});
      AgentStream::Message m;
      if (!ping->Next(&m, 1000) && self->alive_) self->on_silence_();
    }).detach();
  } catch (const std::system_error&) {
    // No thread to spare (the host is at its limit): the next wait tries again.
    last_silence_ms_ = 0;
  }
}

void AgentConnection::Close() {
  if (reader_.joinable()) {
    char b = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_w_.get(), &b, 1);
    if (reader_.get_id() == std::this_thread::get_id()) {
      reader_.detach();
    } else {
      reader_.join();
    }
  }
}

void AgentConnection::OnClose(std::function<void()> cb) {
  std::lock_guard lock(mu_);
  on_close_ = std::move(cb);
}

bool AgentConnection::WriteFrame(const std::string& frame) {
  if (!alive_) return false;
  std::lock_guard lock(write_mu_);
  int64_t deadline = MonotonicNowMs() + kWriteDeadlineMs;
  size_t off = 0;
  while (off < frame.size()) {
    if (!alive_) return false;
    ssize_t n = ::write(in_.get(), frame.data() + off, frame.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return false;  // EPIPE: the sandbox is gone
    // The FIFO is full: the agent is not reading. Wait for room, for a
    // Close()/Break() (the wake pipe), or the deadline.
    int64_t left = deadline - MonotonicNowMs();
    if (left <= 0) {
      Break("agent_unresponsive",
            "the agent took no input for " + std::to_string(kWriteDeadlineMs / 1000) + " s");
      return false;
    }
    pollfd p[2] = {{in_.get(), POLLOUT, 0}, {wake_r_.get(), POLLIN, 0}};
    if (::poll(p, 2, static_cast<int>(std::min<int64_t>(left, 1000))) > 0 && p[1].revents)
      return false;
  }
  return true;
}

void AgentConnection::Break(const std::string& reason, const std::string& detail) {
  {
    std::lock_guard lock(reason_mu_);
    if (!close_reason_.empty()) return;
    close_reason_ = reason;
  }
  LogWarn(
      "the sandbox's agent broke its channel: stopping the sandbox",
      {{"event", "agent.broken"}, {"sandboxId", label_}, {"reason", reason}, {"detail", detail}});
  alive_ = false;
  // Wakes the reader (which ends the channel: every op gets kClosed, then
  // OnClose) and every writer waiting for room.
  char b = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_w_.get(), &b, 1);
}

void AgentConnection::Abort() {
  {
    std::lock_guard lock(reason_mu_);
    if (!close_reason_.empty()) return;
    close_reason_ = "stopped";  // by kiln: the control plane is stopping the sandbox
  }
  alive_ = false;
  char b = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_w_.get(), &b, 1);
}

std::string AgentConnection::close_reason() const {
  std::lock_guard lock(reason_mu_);
  return close_reason_;
}

bool AgentConnection::Deliver(uint32_t stream, AgentOp::Message m, uint64_t text_size,
                              std::string* why) {
  std::lock_guard lock(mu_);
  auto it = ops_.find(stream);
  if (it == ops_.end()) return true;  // an op that is over: dropped
  AgentOp& op = *it->second;
  {
    std::lock_guard op_lock(op.mu_);
    if (op.answered_) return true;  // nothing comes after the answer
    if (m.kind == AgentOp::Message::kData) {
      op.unacked_ += m.data.size();
      if (op.unacked_ > proto::kStreamWindow + kWindowSlack) {
        *why = "stream " + std::to_string(stream) + " sent " + std::to_string(op.unacked_) +
               " bytes of output past its " + std::to_string(proto::kStreamWindow) + "-byte window";
        return false;
      }
    } else {
      op.queued_ += text_size;
      if (op.queued_ > kMaxQueued) {
        *why = "stream " + std::to_string(stream) + " has over " +
               std::to_string(kMaxQueued >> 20) + " MiB of answers waiting";
        return false;
      }
    }
  }
  op.Push(std::move(m), text_size);
  return true;
}

std::unique_ptr<AgentStream> AgentConnection::Start(const json& request) {
  uint32_t stream;
  std::unique_ptr<AgentOp> op;
  {
    std::lock_guard lock(mu_);
    stream = next_stream_++;
    if (next_stream_ == 0) next_stream_ = 1;
    op.reset(new AgentOp(shared_from_this(), stream));
    op->credit_ = proto::kStreamWindow;
    ops_[stream] = op.get();
  }
  bool ok = alive_;
  if (ok) {
    for (auto& f : proto::EncodeFragments(FrameType::kRequest, stream, request.dump(),
                                          proto::kMaxDaemonPayload))
      ok = ok && WriteFrame(f);
  }
  if (!ok) op->Push(AgentOp::Message{AgentOp::Message::kClosed});
  return op;
}

void AgentConnection::Unregister(uint32_t stream) {
  std::lock_guard lock(mu_);
  ops_.erase(stream);
}

void AgentConnection::ReadLoop() {
  proto::FrameDecoder dec(proto::kMaxAgentPayload);
  proto::Reassembler messages(kMaxMessage, kMaxPartial);
  dec.Feed(initial_);
  initial_.clear();
  char buf[65536];
  std::string why;
  // One frame from the agent; false if it broke the protocol (`why`).
  auto dispatch = [&](proto::Frame f) {
    last_heard_ms_ = MonotonicNowMs();
    AgentOp::Message m;
    if (f.type == FrameType::kData) {
      m.kind = AgentOp::Message::kData;
      m.channel = f.channel;
      m.end = f.flags & proto::kFlagEnd;
      m.data = std::move(f.payload);
    } else if (f.type == FrameType::kEvent || f.type == FrameType::kResponse) {
      {
        std::lock_guard lock(mu_);
        if (!ops_.count(f.stream)) {  // an op that is over: nothing to keep
          messages.Drop(f.stream);
          return true;
        }
      }
      auto whole = messages.Add(f);
      if (messages.error()) {
        why = "a message over " + std::to_string(kMaxMessage >> 20) + " MiB, or over " +
              std::to_string(kMaxPartial >> 20) + " MiB of unfinished messages";
        return false;
      }
      if (!whole) return true;
      std::string bad;
      std::optional<json> body = ParseJsonBounded(*whole, &bad);
      if (!body) {
        why = "an answer that " + bad;
        return false;
      }
      m.kind = f.type == FrameType::kEvent ? AgentOp::Message::kEvent : AgentOp::Message::kResponse;
      m.body = std::move(*body);
      return Deliver(f.stream, std::move(m), whole->size(), &why);
    } else if (f.type == FrameType::kWindow) {
      std::lock_guard lock(mu_);
      auto it = ops_.find(f.stream);
      if (it != ops_.end()) it->second->AddCredit(proto::DecodeWindow(f.payload));
      return true;
    } else {
      why = "a frame of type " + std::to_string(static_cast<int>(f.type)) + " that no agent sends";
      return false;
    }
    return Deliver(f.stream, std::move(m), 0, &why);
  };
  bool closing = false;  // Close(): the connection object is going away
  for (;;) {
    bool ok = true;
    while (ok && alive_) {
      auto f = dec.Next();
      if (!f) break;
      ok = dispatch(std::move(*f));
    }
    if (!ok) {
      Break("agent_protocol_error", why);
      break;
    }
    if (dec.error()) {
      Break("agent_protocol_error", "a frame with a bad header");
      break;
    }
    if (!alive_) break;  // Break() from a writer
    pollfd p[2] = {{out_.get(), POLLIN, 0}, {wake_r_.get(), POLLIN, 0}};
    if (poll(p, 2, -1) < 0) continue;
    if (p[1].revents) {
      closing = close_reason().empty();
      break;
    }
    ssize_t n = ::read(out_.get(), buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) break;  // every writer is gone: the sandbox ended
    dec.Feed(std::string_view(buf, static_cast<size_t>(n)));
  }
  if (closing) return;
  alive_ = false;
  std::function<void()> cb;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, op] : ops_) op->Push(AgentOp::Message{AgentOp::Message::kClosed});
    cb = std::move(on_close_);
  }
  if (cb) cb();
}

}  // namespace kiln::engine
