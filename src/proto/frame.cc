#include "proto/frame.h"

#include <algorithm>
#include <cstring>

namespace kiln::proto {
namespace {

void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
uint8_t CheckByte(const char* h) {
  uint8_t c = 0xA5;
  for (size_t i = 0; i < kHeaderSize - 1; ++i)
    c = static_cast<uint8_t>((c << 1 | c >> 7) ^ static_cast<uint8_t>(h[i]));
  return c;
}
bool ValidType(uint8_t t) { return t >= 1 && t <= 7; }

}  // namespace

void AppendFrame(std::string& out, FrameType type, uint32_t stream, std::string_view payload,
                 uint8_t flags, uint8_t channel) {
  char h[kHeaderSize];
  PutU32(h, static_cast<uint32_t>(payload.size()));
  PutU32(h + 4, stream);
  h[8] = static_cast<char>(type);
  h[9] = static_cast<char>(flags);
  h[10] = static_cast<char>(channel);
  h[11] = static_cast<char>(CheckByte(h));
  out.append(h, kHeaderSize);
  out.append(payload);
}

std::string EncodeFrame(FrameType type, uint32_t stream, std::string_view payload, uint8_t flags,
                        uint8_t channel) {
  std::string out;
  out.reserve(kHeaderSize + payload.size());
  AppendFrame(out, type, stream, payload, flags, channel);
  return out;
}

std::vector<std::string> EncodeFragments(FrameType type, uint32_t stream, std::string_view payload,
                                         size_t max_payload, uint8_t channel) {
  std::vector<std::string> frames;
  do {
    size_t n = std::min(payload.size(), max_payload);
    bool more = n < payload.size();
    frames.push_back(
        EncodeFrame(type, stream, payload.substr(0, n), more ? kFlagMore : 0, channel));
    payload.remove_prefix(n);
  } while (!payload.empty());
  return frames;
}

std::string EncodeWindow(uint32_t stream, uint32_t bytes) {
  char p[4];
  PutU32(p, bytes);
  return EncodeFrame(FrameType::kWindow, stream, std::string_view(p, 4));
}

uint32_t DecodeWindow(std::string_view payload) {
  return payload.size() == 4 ? GetU32(payload.data()) : 0;
}

std::string SyncMarker(uint64_t nonce) {
  std::string m(kSyncMagic);
  char n[8];
  std::memcpy(n, &nonce, 8);
  m.append(n, 8);
  return m;
}

std::optional<Frame> FrameDecoder::Next() {
  if (error_ || buffered() < kHeaderSize) return std::nullopt;
  const char* h = buffer_.data() + offset_;
  uint32_t len = GetU32(h);
  uint8_t type = static_cast<uint8_t>(h[8]);
  if (static_cast<uint8_t>(h[11]) != CheckByte(h) || !ValidType(type) || len > max_payload_) {
    error_ = true;
    return std::nullopt;
  }
  if (buffered() < kHeaderSize + len) return std::nullopt;
  Frame f;
  f.type = static_cast<FrameType>(type);
  f.stream = GetU32(h + 4);
  f.flags = static_cast<uint8_t>(h[9]);
  f.channel = static_cast<uint8_t>(h[10]);
  f.payload.assign(h + kHeaderSize, len);
  offset_ += kHeaderSize + len;
  Compact();
  return f;
}

bool FrameDecoder::SkipToSync(uint64_t nonce) {
  std::string marker = SyncMarker(nonce);
  size_t pos = buffer_.find(marker, offset_);
  if (pos == std::string::npos) {
    // Keep a tail that could hold the start of the marker.
    if (buffered() > kSyncMarkerSize) offset_ = buffer_.size() - kSyncMarkerSize;
    Compact();
    return false;
  }
  offset_ = pos + marker.size();
  error_ = false;
  Compact();
  return true;
}

void FrameDecoder::Compact() {
  if (offset_ > 0 && (offset_ == buffer_.size() || offset_ > (1u << 20))) {
    buffer_.erase(0, offset_);
    offset_ = 0;
  }
}

std::optional<std::string> Reassembler::Add(const Frame& frame) {
  if (error_) return std::nullopt;
  auto it = std::find_if(partial_.begin(), partial_.end(),
                         [&](const auto& p) { return p.first == frame.stream; });
  size_t have = it == partial_.end() ? 0 : it->second.size();
  if (have + frame.payload.size() > max_message_ || total_ + frame.payload.size() > max_total_) {
    error_ = true;
    Clear();
    return std::nullopt;
  }
  if (frame.flags & kFlagMore) {
    if (it == partial_.end()) {
      partial_.emplace_back(frame.stream, frame.payload);
    } else {
      it->second += frame.payload;
    }
    total_ += frame.payload.size();
    return std::nullopt;
  }
  if (it == partial_.end()) return frame.payload;
  std::string whole = std::move(it->second);
  whole += frame.payload;
  total_ -= have;
  partial_.erase(it);
  return whole;
}

void Reassembler::Drop(uint32_t stream) {
  std::erase_if(partial_, [&](const auto& p) {
    if (p.first != stream) return false;
    total_ -= p.second.size();
    return true;
  });
}

}  // namespace kiln::proto
