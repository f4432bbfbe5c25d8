// Terminal tickets: how a browser opens a sandbox's terminal WebSocket. A
// browser cannot set headers on a WebSocket, and a key in the URL would end
// up in histories and proxies' logs; so the console asks for a ticket with
// its key (POST /v1/sandboxes/{id}/terminal-tickets) and offers it as the
// subprotocol "runtime.ticket.<t>". A ticket is bound to one key and one
// sandbox, lives 30 s and opens one socket.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kiln::api {

class TerminalTickets {
 public:
  static constexpr int64_t kLifetimeMs = 30'000;
  // Outstanding tickets per key and in all: a key cannot fill the daemon's
  // memory by asking for tickets it never uses.
  static constexpr size_t kMaxPerKey = 32;
  static constexpr size_t kMaxTotal = 4096;

  struct Ticket {
    std::string token;  // "tkt_" + 64 hex digits
    int64_t expires_at_ms = 0;
  };
  // kRateLimited when `key_id` (or the daemon) holds too many live tickets.
  Result<Ticket> Issue(const std::string& key_id, const std::string& sandbox_id, int64_t now_ms);
  // The key the ticket was issued to, if it is live and for `sandbox_id`.
  // A presented ticket is spent whether or not it matched, so a ticket seen
  // by anyone else is useless to them.
  std::optional<std::string> Redeem(std::string_view token, const std::string& sandbox_id,
                                    int64_t now_ms);
  size_t outstanding() const;

 private:
  struct Entry {
    std::string key_id;
    std::string sandbox_id;
    int64_t expires_at_ms;
  };
  void DropExpired(int64_t now_ms);  // under mu_

  mutable std::mutex mu_;
  std::map<std::string, Entry, std::less<>> tickets_;  // by token
};

// The ticket a WebSocket handshake offers in its Sec-WebSocket-Protocol
// header ("runtime.terminal.v1, runtime.ticket.<t>"), if any.
std::optional<std::string> TicketOfProtocols(std::string_view header);

}  // namespace kiln::api
