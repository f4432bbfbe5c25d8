#include "api/front.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>

#include "api/auth.h"
#include "api/errors.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"

namespace kiln::api {

using nlohmann::json;

namespace {

// Health, and the console's static files (the console asks for a key and
// sends it with each API call it makes).
bool Unauthenticated(const Exchange& ex) {
  const std::string& p = ex.path();
  return p == "/v1/health" || p == "/ui" || p.starts_with("/ui/");
}

// The code of a JSON error answer; `fallback` when it has none.
std::string ErrorCodeOf(const std::string& body, const std::string& fallback = "") {
  json j = json::parse(body, nullptr, false);
  return j.is_object() ? j.value("/error/code"_json_pointer, fallback) : fallback;
}

// Answers that clear on their own: a retry with the same key must run again,
// not replay the refusal (the SDKs retry creates on no_capacity).
bool Retryable(int status, const std::string& body) {
  if (status >= 500 || status == 429) return true;
  if (status != 409) return false;
  std::string code = ErrorCodeOf(body);
  return code == "no_capacity" || code == "quota_exceeded";
}

// kiln's own error answer (api/errors.h), with Retry-After.
void SendKilnError(Exchange& ex, const ApiError& e) {
  if (ex.responded()) return;
  if (e.status().retry_after_s() > 0)
    ex.extra_headers.emplace_back("Retry-After", std::to_string(e.status().retry_after_s()));
  ex.SendJson(e.http_status(), ErrorBody(e.status(), ex.request_id()));
}

}  // namespace

const ApiFront::Dialect* ApiFront::DialectOf(const Exchange& ex) const {
  for (const Dialect& d : dialects_)
    if (ex.path().starts_with(d.prefix)) return &d;
  return nullptr;
}

void ApiFront::Limit(const std::string& who, const std::string& what) {
  if (!limiter_ || !limiter_->enabled()) return;
  auto wait_s = limiter_->Take(who);
  if (!wait_s) return;
  char rate[32];
  std::snprintf(rate, sizeof rate, "%g", limiter_->rate());
  throw ApiError(Status(Code::kRateLimited,
                        what + " is over its rate limit of " + rate + " requests/s (burst " +
                            std::to_string(limiter_->burst()) + "); retry after " +
                            std::to_string(*wait_s) + " s",
                        json{{"limit", limiter_->rate()}, {"burst", limiter_->burst()}})
                     .WithRetryAfter(*wait_s));
}

bool ApiFront::AuthenticateTicket(Exchange& ex) {
  static constexpr std::string_view kPrefix = "/v1/sandboxes/", kSuffix = "/terminal";
  std::string_view path = ex.path();
  if (!tickets_ || !ex.Header("Authorization").empty() || !path.starts_with(kPrefix) ||
      !path.ends_with(kSuffix) || path.size() <= kPrefix.size() + kSuffix.size())
    return false;
  auto ticket = TicketOfProtocols(ex.Header("Sec-WebSocket-Protocol"));
  if (!ticket) return false;
  std::string sandbox(path.substr(kPrefix.size(), path.size() - kPrefix.size() - kSuffix.size()));
  auto key_id = tickets_->Redeem(*ticket, sandbox, StableNowMs());
  auto key = key_id ? keys_.Get(*key_id) : std::nullopt;
  if (!key || key->revoked_ms) {
    SetCaller(ex, Caller{});
    LimitAddress(ex);
    throw ApiError(Code::kUnauthorized,
                   "the terminal ticket is unknown, used, expired or for another sandbox: "
                   "ask for a new one (POST /v1/sandboxes/{id}/terminal-tickets)");
  }
  SetCaller(ex, Caller{key->id, key->admin, key->daily_limit_micros});
  if (!key->admin) Limit("key:" + key->id, "API key " + key->id);
  return true;
}

void ApiFront::LimitAddress(const Exchange& ex) {
  std::string addr = ex.peer_address();
  Limit("ip:" + addr, "client " + (addr.empty() ? std::string("(unknown)") : addr));
}

void ApiFront::Authenticate(Exchange& ex) {
  // Callers without a valid key are limited by address: guessing keys
  // spends the guesser's own bucket, not anyone's key's.
  auto by_address = [&] { LimitAddress(ex); };
  bool signed_link = std::any_of(signed_prefixes_.begin(), signed_prefixes_.end(),
                                 [&](const std::string& p) { return ex.path().starts_with(p); });
  if (Unauthenticated(ex) || signed_link) {
    SetCaller(ex, Caller{});
    by_address();
    return;
  }
  if (AuthenticateTicket(ex)) return;
  const Dialect* dialect = DialectOf(ex);
  bool own_key = dialect && dialect->key;
  auto token = own_key ? dialect->key(ex) : BearerToken(ex.Header("Authorization"));
  if (!token) {
    SetCaller(ex, Caller{});
    by_address();
    throw ApiError(Code::kUnauthorized,
                   "missing API key: send " +
                       (own_key ? dialect->key_hint : std::string("Authorization: Bearer KEY")));
  }
  auto key = keys_.Authenticate(*token);
  if (!key) {
    SetCaller(ex, Caller{});
    by_address();
    throw ApiError(Code::kUnauthorized, "the API key is unknown or revoked");
  }
  SetCaller(ex, Caller{key->id, key->admin, key->daily_limit_micros});
  if (!key->admin) Limit("key:" + key->id, "API key " + key->id);
}

void ApiFront::DispatchOnce(Exchange& ex, const std::string& idempotency_key) {
  const std::string& key_id = CallerOf(ex).key_id;
  json body = ex.JsonBody(16 << 20);  // the largest any route takes
  std::string fingerprint =
      store::IdempotencyStore::Fingerprint(ex.method(), ex.path(), body.dump());
  int status = 0;
  std::string stored;
  switch (idempotency_.Start(key_id, idempotency_key, fingerprint, &status, &stored)) {
    case store::IdempotencyStore::Begin::kReplay: {
      json answer = json::parse(stored, nullptr, false);
      if (answer.is_object()) answer["replayed"] = true;
      ex.extra_headers.emplace_back("Idempotency-Replayed", "true");
      ex.SendJson(status, answer);
      return;
    }
    case store::IdempotencyStore::Begin::kMismatch:
      throw ApiError(Code::kIdempotencyKeyReused,
                     "Idempotency-Key " + idempotency_key + " was used with a different request");
    case store::IdempotencyStore::Begin::kInProgress: {
      throw ApiError(Status(Code::kRequestInProgress, "a request with Idempotency-Key " +
                                                          idempotency_key + " is still running")
                         .WithRetryAfter(1));
    }
    case store::IdempotencyStore::Begin::kNew:
      break;
  }
  // Settled before the answer's first byte goes out: a client that gets a
  // retryable refusal may retry at once and must not find the key still
  // "in progress".
  bool settled = false;
  ex.before_answer = [&](int status, const std::string* sent) {
    settled = true;
    if (sent && !Retryable(status, *sent)) {
      idempotency_.Complete(key_id, idempotency_key, status, *sent);
    } else {
      idempotency_.Abandon(key_id, idempotency_key);
    }
  };
  try {
    RunRoute(ex);
  } catch (const ApiError& e) {
    AnswerError(ex, e, false);
  } catch (...) {
    ex.before_answer = nullptr;
    if (!settled) idempotency_.Abandon(key_id, idempotency_key);
    throw;
  }
  ex.before_answer = nullptr;
  if (!settled) idempotency_.Abandon(key_id, idempotency_key);
}

void ApiFront::Dispatch(Exchange& ex) {
  std::string idem = ex.Header("Idempotency-Key");
  // A request relayed to a sandbox's port is the server's to answer: its
  // Idempotency-Key (and body) are passed on, not acted on.
  bool relayed = ex.path().find("/ports/") != std::string::npos &&
                 router_.PatternFor(ex.path()).find("/ports/{port}") != std::string::npos;
  if (idem.empty() || ex.method() == "GET" || relayed) {
    RunRoute(ex);
    return;
  }
  static const std::regex kKey("[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}");
  if (!std::regex_match(idem, kKey))
    throw InvalidField("header.Idempotency-Key",
                       "must be 1-128 characters: a letter or digit, then letters, digits, "
                       "'_', '.', ':' or '-'");
  // PUTs replace a resource (file content, an archive, a policy): running
  // one twice leaves the same state, and their bodies may be raw bytes. A
  // body that is not JSON (a snapshot's tar) is not read ahead either: its
  // route reads it as it comes, within its own cap.
  std::string type = ex.Header("Content-Type");
  bool json_body = type.empty() || type.starts_with("application/json");
  if (ex.method() == "PUT" || !json_body) {
    RunRoute(ex);
    return;
  }
  DispatchOnce(ex, idem);
}

void ApiFront::RunRoute(Exchange& ex) const {
  const Handler& route = router_.HandlerFor(ex);
  try {
    route(ex);
  } catch (const ApiError& e) {
    AnswerError(ex, e, true);
  }
}

void ApiFront::AnswerError(Exchange& ex, const ApiError& e, bool from_route) const {
  const Dialect* d = DialectOf(ex);
  if (d && (from_route || d->errors == Dialect::Errors::kAll)) {
    d->send_error(ex, e.status());
  } else {
    SendKilnError(ex, e);
  }
}

void ApiFront::Handle(Exchange& ex) {
  int64_t t0 = MonotonicNowMs();
  std::string route = router_.PatternFor(ex.path());
  try {
    if (host_claims_ && host_claims_(ex)) {
      route = "{port}-{id} host";
      SetCaller(ex, Caller{});
      LimitAddress(ex);
      host_handler_(ex);
    } else {
      Authenticate(ex);
      Dispatch(ex);
    }
  } catch (const ApiError& e) {
    AnswerError(ex, e, false);
  }
  double seconds = static_cast<double>(MonotonicNowMs() - t0) / 1000.0;
  int status = ex.status();
  metrics::Observe("kiln_http_request_seconds", {{"method", ex.method()}, {"route", route}},
                   seconds);
  // create and restore are told apart by the create handler itself.
  static const std::map<std::string, std::string> kOps = {
      {"/v1/sandboxes/{id}:exec", "exec"},
      {"/v1/sandboxes/{id}:snapshot", "snapshot"},
      {"/v1/sandboxes/{id}:fork", "fork"}};
  if (auto op = kOps.find(route); op != kOps.end() && status < 400)
    metrics::ObserveOperation(op->second, seconds);
  if (status >= 400) {
    const std::string* sent = ex.sent_json();
    std::string code = sent ? ErrorCodeOf(*sent, "unknown") : "unknown";
    metrics::Inc("kiln_http_errors_total", {{"code", code}, {"status", std::to_string(status)}});
  }
  LogInfo("request", {{"event", "http.request"},
                      {"requestId", ex.request_id()},
                      {"method", ex.method()},
                      {"route", route},
                      {"status", status},
                      {"keyId", CallerOf(ex).key_id},
                      {"ms", MonotonicNowMs() - t0}});
}

}  // namespace kiln::api
