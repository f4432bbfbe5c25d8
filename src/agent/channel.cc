#include "agent/channel.h"

#include "proto/ops.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace kiln::agent {

using nlohmann::json;
using proto::FrameType;

Channel::Channel(EventLoop& loop, int in_fd, int out_fd, Handler& handler)
    : loop_(loop), in_fd_(in_fd), out_fd_(out_fd), handler_(handler) {
  loop_.Add(in_fd_, EPOLLIN, [this](uint32_t) { OnReadable(); });
  loop_.Add(out_fd_, 0, [this](uint32_t) { OnWritable(); });
}

void Channel::OnReadable() {
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(in_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EAGAIN; EOF cannot happen on a FIFO the daemon holds open
    decoder_.Feed(std::string_view(buf, static_cast<size_t>(n)));
    while (auto frame = decoder_.Next()) HandleFrame(std::move(*frame));
    if (decoder_.error()) {
      // Daemon frames are written atomically, so this is a bug, not a torn
      // write. Start over at the next read, which begins a frame.
      std::fprintf(stderr, "kiln-agent: corrupt frame from daemon; dropping buffered input\n");
      decoder_ = proto::FrameDecoder(proto::kMaxDaemonPayload);
    }
    if (static_cast<size_t>(n) < sizeof buf) break;
  }
}

void Channel::HandleFrame(proto::Frame frame) {
  switch (frame.type) {
    case FrameType::kHello: {
      json hello = json::parse(frame.payload, nullptr, false);
      StartSession(hello);
      return;
    }
    case FrameType::kRequest: {
      auto whole = requests_.Add(frame);
      if (!whole) return;
      json request = json::parse(*whole, nullptr, false);
      if (request.is_discarded() || !request.is_object()) {
        SendError(frame.stream, "invalid_request", "request is not a JSON object");
        return;
      }
      handler_.OnRequest(frame.stream, std::move(request));
      return;
    }
    case FrameType::kData:
      handler_.OnData(frame.stream, frame.channel, std::move(frame.payload),
                      (frame.flags & proto::kFlagEnd) != 0);
      return;
    case FrameType::kCancel:
      requests_.Drop(frame.stream);
      handler_.OnCancel(frame.stream);
      return;
    case FrameType::kWindow:
      handler_.OnWindow(frame.stream, proto::DecodeWindow(frame.payload));
      return;
    default:
      return;
  }
}

void Channel::StartSession(const json& hello) {
  uint64_t nonce = 0;
  if (hello.is_object() && hello.contains("nonce") && hello["nonce"].is_number_unsigned()) {
    nonce = hello["nonce"].get<uint64_t>();
  }
  requests_.Clear();
  handler_.OnNewSession();
  // Whatever is still queued belongs to the old session; the new reader
  // skips to the marker anyway, so drop it rather than send it.
  out_.clear();
  out_offset_ = 0;
  std::string marker = proto::SyncMarker(nonce);
  Queue(marker);
  SendResponse(0, json{{"agent", "kiln-agent"}, {"version", KILN_VERSION}, {"pid", getpid()}});
}

void Channel::SendEvent(uint32_t stream, const json& event) {
  std::string body = event.dump(-1, ' ', false, json::error_handler_t::replace);
  for (auto& f : proto::EncodeFragments(FrameType::kEvent, stream, body, proto::kMaxAgentPayload))
    Queue(std::move(f));
}

void Channel::SendResponse(uint32_t stream, const json& response) {
  std::string body = response.dump(-1, ' ', false, json::error_handler_t::replace);
  for (auto& f :
       proto::EncodeFragments(FrameType::kResponse, stream, body, proto::kMaxAgentPayload))
    Queue(std::move(f));
}

void Channel::SendError(uint32_t stream, std::string_view code, std::string_view message) {
  SendResponse(stream,
               proto::AgentError{.code = std::string(code), .message = std::string(message)});
}

void Channel::SendWindow(uint32_t stream, uint32_t bytes) {
  Queue(proto::EncodeWindow(stream, bytes));
}

void Channel::SendData(uint32_t stream, uint8_t channel, std::string_view data, bool end) {
  do {
    size_t n = std::min(data.size(), proto::kMaxAgentPayload);
    bool last = n == data.size();
    Queue(proto::EncodeFrame(FrameType::kData, stream, data.substr(0, n),
                             static_cast<uint8_t>((last && end) ? proto::kFlagEnd : 0), channel));
    data.remove_prefix(n);
  } while (!data.empty());
}

void Channel::Queue(std::string bytes) {
  if (out_offset_ == out_.size()) {
    out_.clear();
    out_offset_ = 0;
  }
  out_ += bytes;
  OnWritable();
}

void Channel::OnWritable() {
  while (out_offset_ < out_.size()) {
    ssize_t n = ::write(out_fd_, out_.data() + out_offset_, out_.size() - out_offset_);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out_offset_ += static_cast<size_t>(n);
  }
  if (out_offset_ == out_.size()) {
    out_.clear();
    out_offset_ = 0;
  } else if (out_offset_ > (4u << 20)) {
    out_.erase(0, out_offset_);
    out_offset_ = 0;
  }
  bool want = out_offset_ < out_.size();
  if (want != want_write_) {
    want_write_ = want;
    loop_.Modify(out_fd_, want ? static_cast<uint32_t>(EPOLLOUT) : 0u);
  }
}

}  // namespace kiln::agent
