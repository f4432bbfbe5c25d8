#include "api/terminal_tickets.h"

#include <cstdio>

#include "common/ids.h"
#include "common/strings.h"

namespace kiln::api {

namespace {

constexpr std::string_view kTicketPrefix = "runtime.ticket.";

std::string NewToken() {
  std::string token = "tkt_";
  for (int i = 0; i < 4; ++i) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(RandomU64()));
    token += hex;
  }
  return token;
}

}  // namespace

void TerminalTickets::DropExpired(int64_t now_ms) {
  std::erase_if(tickets_, [now_ms](const auto& t) { return t.second.expires_at_ms <= now_ms; });
}

Result<TerminalTickets::Ticket> TerminalTickets::Issue(const std::string& key_id,
                                                       const std::string& sandbox_id,
                                                       int64_t now_ms) {
  std::lock_guard lock(mu_);
  DropExpired(now_ms);
  size_t mine = 0;
  for (const auto& [token, e] : tickets_) mine += e.key_id == key_id;
  if (mine >= kMaxPerKey || tickets_.size() >= kMaxTotal)
    return Status(Code::kRateLimited, "too many unused terminal tickets (at most " +
                                          std::to_string(kMaxPerKey) + " per key); each lives " +
                                          std::to_string(kLifetimeMs / 1000) + " s")
        .WithRetryAfter(static_cast<int>(kLifetimeMs / 1000));
  Ticket t{NewToken(), now_ms + kLifetimeMs};
  tickets_.emplace(t.token, Entry{key_id, sandbox_id, t.expires_at_ms});
  return t;
}

std::optional<std::string> TerminalTickets::Redeem(std::string_view token,
                                                   const std::string& sandbox_id, int64_t now_ms) {
  std::lock_guard lock(mu_);
  auto it = tickets_.find(token);
  if (it == tickets_.end()) return std::nullopt;
  Entry e = std::move(it->second);
  tickets_.erase(it);
  if (e.expires_at_ms <= now_ms || e.sandbox_id != sandbox_id) return std::nullopt;
  return e.key_id;
}

size_t TerminalTickets::outstanding() const {
  std::lock_guard lock(mu_);
  return tickets_.size();
}

std::optional<std::string> TicketOfProtocols(std::string_view header) {
  while (!header.empty()) {
    size_t comma = header.find(',');
    std::string_view item = TrimBlanks(header.substr(0, comma));
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    if (item.starts_with(kTicketPrefix) && item.size() > kTicketPrefix.size())
      return std::string(item.substr(kTicketPrefix.size()));
  }
  return std::nullopt;
}

}  // namespace kiln::api
