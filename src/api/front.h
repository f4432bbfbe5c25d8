// What every request goes through before and after its route's handler:
// authentication (Bearer API key), per-caller rate limits, idempotent
// replays, error answers (with Retry-After) in the shape of the front that
// owns the request, one structured log line, and request metrics.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/rate_limit.h"
#include "api/router.h"
#include "api/terminal_tickets.h"
#include "common/status.h"
#include "store/idempotency_store.h"
#include "store/key_store.h"

namespace kiln::api {

class ApiFront {
 public:
  // `limiter` (may be null: no limits) is asked once per request, after the
  // key is known: a valid key draws from its own bucket, anything else
  // (health, a missing or wrong key) from its client address's. Admin keys
  // are not limited: they are the operator's.
  ApiFront(const Router& router, store::KeyStore& keys, store::IdempotencyStore& idempotency,
           RateLimiter* limiter = nullptr)
      : router_(router), keys_(keys), idempotency_(idempotency), limiter_(limiter) {}

  void Handle(Exchange& ex);
  // Requests `claims` says are the host handler's are its own: a sandbox's
  // port by {port}-{id}.{domain}, or E2B's sandbox plane, authenticated
  // there by tokens. They still take from the client address's rate
  // bucket first, as any request without a key does.
  void SetHostHandler(std::function<bool(const Exchange&)> claims,
                      std::function<void(Exchange&)> handler) {
    host_claims_ = std::move(claims);
    host_handler_ = std::move(handler);
  }
  // A vendor's front under `prefix` (E2B's "/e2b/"): where its clients put
  // the key, and the shape its clients read errors in. Each vendor front
  // has exactly one (E2bDialect, PandaStackDialect, SandboxFusionDialect);
  // kiln's own shape (api/errors.h) answers the requests no dialect owns.
  // A front's routes only throw ApiError: its dialect is the one place
  // their shape is chosen.
  struct Dialect {
    std::string prefix;  // the requests it owns: those whose path starts with it
    // The kiln key the request carries, spelled as kiln spells it; nullopt
    // when it carries none. Unset: kiln's own, Authorization: Bearer.
    std::function<std::optional<std::string>(const Exchange&)> key;
    std::string key_hint;  // where to send it: "X-API-Key: e2b_..."; "" with kiln's key
    // Answers `s` in the front's shape; nothing if an answer already began.
    std::function<void(Exchange&, const Status&)> send_error;
    // Which errors of its requests it answers: all of them, or only those
    // its routes throw. With kRoutes, the refusals made before a route runs
    // (a missing or unknown key, a rate limit, a bad or reused
    // Idempotency-Key, no such route) keep kiln's shape, as PandaStack's
    // client has always read them.
    enum class Errors { kAll, kRoutes };
    Errors errors = Errors::kAll;
  };
  void AddDialect(Dialect dialect) { dialects_.push_back(std::move(dialect)); }
  // Requests under `prefix` carry a signed link in place of a key (E2B's
  // template uploads, which its SDK sends from a fresh client without the
  // key): they pass here without one, drawing from their client address's
  // rate bucket, and their route checks the link's signature.
  void AcceptSignedLinks(std::string prefix) { signed_prefixes_.push_back(std::move(prefix)); }
  // Terminal WebSockets without an Authorization header may then offer a
  // ticket from `tickets` instead (api/terminal_tickets.h).
  void AcceptTerminalTickets(TerminalTickets* tickets) { tickets_ = tickets; }

 private:
  void Authenticate(Exchange& ex);
  // 429 once the client address of a request without a key is over its rate.
  void LimitAddress(const Exchange& ex);
  // True when `ex` is a terminal handshake that carried a ticket: its
  // caller is then the ticket's key (or it throws 401).
  bool AuthenticateTicket(Exchange& ex);
  // 429 rate_limited (with Retry-After) once `who` is over its rate.
  void Limit(const std::string& who, const std::string& what);
  void Dispatch(Exchange& ex);
  void DispatchOnce(Exchange& ex, const std::string& idempotency_key);
  // Runs the route. An ApiError it throws is answered here, in its
  // dialect's shape, so that an idempotent request stores that answer for
  // replay like any other; routing's own refusals (404, 405) go on up.
  void RunRoute(Exchange& ex) const;
  // Answers `e` in the shape of the dialect that owns `ex` (kiln's if none
  // does, or if the dialect answers only its routes' errors and `e` is not
  // one of them).
  void AnswerError(Exchange& ex, const ApiError& e, bool from_route) const;

  const Router& router_;
  store::KeyStore& keys_;
  store::IdempotencyStore& idempotency_;
  RateLimiter* limiter_;
  const Dialect* DialectOf(const Exchange& ex) const;

  std::function<bool(const Exchange&)> host_claims_;
  std::function<void(Exchange&)> host_handler_;
  std::vector<Dialect> dialects_;
  std::vector<std::string> signed_prefixes_;
  TerminalTickets* tickets_ = nullptr;
};

}  // namespace kiln::api
