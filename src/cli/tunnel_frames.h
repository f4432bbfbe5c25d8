// The pure parts of `kiln sandbox port-forward`: the tunnel WebSocket's
// frames (a kind byte, a 32-bit big-endian stream number, a payload; see
// docs/api.md "Ports, previews and the tunnel"), the client's credit window
// and the `[LOCAL:]REMOTE` argument.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::cli {

inline constexpr std::uint64_t kTunnelWindow = 1 << 20;  // client bytes past the last `a`
inline constexpr std::size_t kTunnelChunk = 64 * 1024;

struct TunnelFrame {
  char kind = 0;  // o d e c a
  std::uint32_t stream = 0;
  std::string_view payload;
};

std::string EncodeTunnelFrame(char kind, std::uint32_t stream, std::string_view payload = {});
// nullopt for a message shorter than 5 bytes or of an unknown kind.
std::optional<TunnelFrame> DecodeTunnelFrame(std::string_view message);
// The count an `a` frame carries; nullopt unless the payload is 8 bytes.
std::optional<std::uint64_t> DecodeTunnelAck(std::string_view payload);

// Data bytes sent against the server's acknowledged count.
class CreditWindow {
 public:
  bool Fits(std::size_t n) const { return sent_ + n - acked_ <= kTunnelWindow; }
  void Spend(std::size_t n) { sent_ += n; }
  // False for a count past what was sent (the server is confused: end).
  bool Ack(std::uint64_t count);
  std::uint64_t sent() const { return sent_; }
  std::uint64_t acked() const { return acked_; }

 private:
  std::uint64_t sent_ = 0, acked_ = 0;
};

struct PortSpec {
  int local = 0;  // 0: the system picks one
  int remote = 0;
};
// "8080" (local = remote), "9000:8080", "0:8080"; throws UsageError.
PortSpec ParsePortSpec(std::string_view text);

}  // namespace kiln::cli
