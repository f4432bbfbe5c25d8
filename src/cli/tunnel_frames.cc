#include "cli/tunnel_frames.h"

#include <charconv>

#include "cli/errors.h"

namespace kiln::cli {

std::string EncodeTunnelFrame(char kind, std::uint32_t stream, std::string_view payload) {
  std::string out;
  out.reserve(5 + payload.size());
  out.push_back(kind);
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(stream >> shift));
  out.append(payload);
  return out;
}

std::optional<TunnelFrame> DecodeTunnelFrame(std::string_view message) {
  if (message.size() < 5) return std::nullopt;
  const char kind = message[0];
  if (kind != 'o' && kind != 'd' && kind != 'e' && kind != 'c' && kind != 'a') return std::nullopt;
  std::uint32_t stream = 0;
  for (int i = 1; i <= 4; ++i) stream = (stream << 8) | static_cast<unsigned char>(message[i]);
  return TunnelFrame{kind, stream, message.substr(5)};
}

std::optional<std::uint64_t> DecodeTunnelAck(std::string_view payload) {
  if (payload.size() != 8) return std::nullopt;
  std::uint64_t count = 0;
  for (char c : payload) count = (count << 8) | static_cast<unsigned char>(c);
  return count;
}

bool CreditWindow::Ack(std::uint64_t count) {
  if (count > sent_) return false;
  if (count > acked_) acked_ = count;
  return true;
}

namespace {

int Port(std::string_view text, bool zero_ok, std::string_view whole) {
  int value = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
      value < (zero_ok ? 0 : 1) || value > 65535) {
    throw UsageError("bad port " + std::string(whole) +
                         ": expected [LOCAL:]REMOTE, ports 1-65535 (LOCAL 0 picks one)",
                     "see `kiln sandbox port-forward --help`");
  }
  return value;
}

}  // namespace

PortSpec ParsePortSpec(std::string_view text) {
  auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    int port = Port(text, false, text);
    return {port, port};
  }
  return {Port(text.substr(0, colon), true, text), Port(text.substr(colon + 1), false, text)};
}

}  // namespace kiln::cli
