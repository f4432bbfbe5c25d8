#include "fakes/fake_agent.h"

#include <algorithm>
#include <chrono>

#include "common/time.h"
#include "proto/frame.h"
#include "proto/ops.h"

namespace kiln::fakes {

using nlohmann::json;
using Message = engine::AgentStream::Message;

std::string OpName(const json& request) {
  if (!request.is_object()) return "";
  auto it = request.find(proto::kOpKey);
  return it != request.end() && it->is_string() ? it->get<std::string>() : "";
}

// ---- FakeAgentOp ----

FakeAgentOp::FakeAgentOp(json request)
    : request_(std::move(request)), name_(OpName(request_)), credit_(proto::kStreamWindow) {}

bool FakeAgentOp::PushLocked(Message m) {
  if (over_) return false;
  if (m.kind == Message::kResponse || m.kind == Message::kClosed) over_ = true;
  to_kilnd_.push_back(std::move(m));
  cv_.notify_all();
  return true;
}

bool FakeAgentOp::Event(json body) {
  Message m;
  m.kind = Message::kEvent;
  m.body = std::move(body);
  std::lock_guard lock(mu_);
  return PushLocked(std::move(m));
}

bool FakeAgentOp::Data(uint8_t channel, std::string data, bool end) {
  Message m;
  m.kind = Message::kData;
  m.channel = channel;
  m.end = end;
  m.data = std::move(data);
  std::lock_guard lock(mu_);
  return PushLocked(std::move(m));
}

bool FakeAgentOp::Respond(json body) {
  Message m;
  m.kind = Message::kResponse;
  m.body = std::move(body);
  std::lock_guard lock(mu_);
  return PushLocked(std::move(m));
}

bool FakeAgentOp::NextInput(Input* in, int timeout_ms) {
  std::unique_lock lock(mu_);
  bool ready = cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                            [&] { return !to_agent_.empty() || over_; });
  if (!ready || to_agent_.empty()) return false;
  *in = std::move(to_agent_.front());
  to_agent_.pop_front();
  credit_ = std::min<uint64_t>(credit_ + in->data.size(), proto::kStreamWindow);
  cv_.notify_all();
  return true;
}

std::string FakeAgentOp::ReadUntilEnd(int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string out;
  for (Input in;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !NextInput(&in, static_cast<int>(left.count()))) return out;
    out += in.data;
    if (in.end) return out;
  }
}

bool FakeAgentOp::over() const {
  std::lock_guard lock(mu_);
  return over_;
}

bool FakeAgentOp::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

bool FakeAgentOp::WaitOver(int timeout_ms) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return over_; });
}

uint64_t FakeAgentOp::acked() const {
  std::lock_guard lock(mu_);
  return acked_;
}

bool FakeAgentOp::NextForKilnd(Message* m, int timeout_ms) {
  std::unique_lock lock(mu_);
  // After the end, every later Next() says so again instead of blocking.
  auto ready = [&] { return !to_kilnd_.empty() || channel_gone_ || cancelled_; };
  if (timeout_ms < 0) {
    cv_.wait(lock, ready);
  } else if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
    return false;
  }
  if (to_kilnd_.empty()) {
    *m = Message{Message::kClosed};
    return true;
  }
  *m = std::move(to_kilnd_.front());
  to_kilnd_.pop_front();
  return true;
}

bool FakeAgentOp::SendFromKilnd(uint8_t channel, std::string_view data, bool end, bool windowed) {
  std::unique_lock lock(mu_);
  if (channel_gone_) return false;
  if (!windowed) {
    to_agent_.push_back(Input{channel, std::string(data), end});
    cv_.notify_all();
    return true;
  }
  // As AgentOp: never more than the window ahead of what the agent consumed.
  do {
    cv_.wait(lock, [&] { return over_ || credit_ > 0 || data.empty(); });
    if (over_) return false;
    size_t n = std::min<uint64_t>(data.size(), credit_);
    credit_ -= n;
    to_agent_.push_back(Input{channel, std::string(data.substr(0, n)), end && n == data.size()});
    cv_.notify_all();
    data.remove_prefix(n);
  } while (!data.empty());
  return true;
}

void FakeAgentOp::AckFromKilnd(uint32_t bytes) {
  std::lock_guard lock(mu_);
  acked_ += bytes;
}

void FakeAgentOp::CancelFromKilnd() {
  std::lock_guard lock(mu_);
  if (over_) return;
  over_ = true;
  cancelled_ = true;
  to_kilnd_.push_back(Message{Message::kClosed});
  cv_.notify_all();
}

void FakeAgentOp::ChannelGone() {
  std::lock_guard lock(mu_);
  channel_gone_ = true;
  if (!over_) {
    over_ = true;
    to_kilnd_.push_back(Message{Message::kClosed});
  }
  cv_.notify_all();
}

// ---- kilnd's end of one operation ----

class FakeStream : public engine::AgentStream {
 public:
  explicit FakeStream(std::shared_ptr<FakeAgentOp> op) : op_(std::move(op)) {}
  ~FakeStream() override { op_->CancelFromKilnd(); }  // as AgentOp: cancels if unanswered

  bool Next(Message* m, int timeout_ms) override { return op_->NextForKilnd(m, timeout_ms); }
  bool SendData(uint8_t channel, std::string_view data, bool end) override {
    return op_->SendFromKilnd(channel, data, end, false);
  }
  bool SendDataWindowed(uint8_t channel, std::string_view data, bool end) override {
    return op_->SendFromKilnd(channel, data, end, true);
  }
  void Ack(uint32_t bytes) override { op_->AckFromKilnd(bytes); }
  void Cancel() override { op_->CancelFromKilnd(); }

 private:
  std::shared_ptr<FakeAgentOp> op_;
};

// ---- FakeAgentChannel ----

FakeAgentChannel::FakeAgentChannel() {
  handlers_[std::string(proto::kPing)] = [](const std::shared_ptr<FakeAgentOp>& op) {
    op->Respond(nlohmann::json(proto::Pong{true, NowMs()}));
  };
  // A restored copy is warmed before anything else asks it (control/snapshot_copy.cc).
  handlers_[std::string(proto::kWarm)] = [](const std::shared_ptr<FakeAgentOp>& op) {
    op->Respond(nlohmann::json(proto::Warmed{}));
  };
}

FakeAgentChannel::~FakeAgentChannel() = default;

std::unique_ptr<engine::AgentStream> FakeAgentChannel::Start(const json& request) {
  auto op = std::make_shared<FakeAgentOp>(request);
  Handler handler;
  {
    std::lock_guard lock(mu_);
    if (!alive_) {
      op->ChannelGone();
      return std::make_unique<FakeStream>(op);
    }
    requests_.push_back(request);
    std::erase_if(open_, [](const std::weak_ptr<FakeAgentOp>& w) { return w.expired(); });
    open_.push_back(op);
    auto it = handlers_.find(op->name());
    if (it != handlers_.end()) {
      handler = it->second;
    } else {
      unclaimed_.push_back(op);
      cv_.notify_all();
    }
  }
  auto stream = std::make_unique<FakeStream>(op);
  if (handler) handler(op);
  return stream;
}

bool FakeAgentChannel::alive() const {
  std::lock_guard lock(mu_);
  return alive_;
}

void FakeAgentChannel::OnClose(std::function<void()> cb) {
  std::lock_guard lock(mu_);
  if (alive_) on_close_ = std::move(cb);
}

void FakeAgentChannel::Close() { End(/*by_kilnd=*/true); }

void FakeAgentChannel::Die() { End(/*by_kilnd=*/false); }

void FakeAgentChannel::End(bool by_kilnd) {
  std::vector<std::shared_ptr<FakeAgentOp>> ops;
  std::function<void()> cb;
  {
    std::lock_guard lock(mu_);
    if (!alive_) return;
    alive_ = false;
    closed_by_kilnd_ = by_kilnd;
    for (auto& w : open_)
      if (auto op = w.lock()) ops.push_back(std::move(op));
    open_.clear();
    cb = std::move(on_close_);
    on_close_ = nullptr;
    if (cb) ++on_close_calls_;
    cv_.notify_all();
  }
  for (auto& op : ops) op->ChannelGone();
  if (cb) cb();
}

void FakeAgentChannel::Handle(const std::string& op, Handler handler) {
  std::lock_guard lock(mu_);
  if (handler) {
    handlers_[op] = std::move(handler);
  } else {
    handlers_.erase(op);
  }
}

std::shared_ptr<FakeAgentOp> FakeAgentChannel::WaitOp(const std::string& op, int timeout_ms) {
  std::unique_lock lock(mu_);
  std::shared_ptr<FakeAgentOp> found;
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
    auto it = std::find_if(unclaimed_.begin(), unclaimed_.end(),
                           [&](const auto& o) { return o->name() == op; });
    if (it == unclaimed_.end()) return false;
    found = *it;
    unclaimed_.erase(it);
    return true;
  });
  return found;
}

std::vector<json> FakeAgentChannel::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

int FakeAgentChannel::Count(const std::string& op) const {
  std::lock_guard lock(mu_);
  return static_cast<int>(std::count_if(requests_.begin(), requests_.end(),
                                        [&](const json& r) { return OpName(r) == op; }));
}

int FakeAgentChannel::on_close_calls() const {
  std::lock_guard lock(mu_);
  return on_close_calls_;
}

bool FakeAgentChannel::closed_by_kilnd() const {
  std::lock_guard lock(mu_);
  return closed_by_kilnd_;
}

}  // namespace kiln::fakes
