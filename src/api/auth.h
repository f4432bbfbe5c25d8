// Who is calling: the auth layer finds the caller's API key before dispatch
// and records it here; handlers read it back (admin checks, daily limits).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "api/http_server.h"

namespace kiln::api {

struct Caller {
  std::string key_id;
  bool admin = false;
  std::optional<int64_t> daily_limit_micros;
};

// The caller of `ex`, set by the auth layer before dispatch. Must be called
// on the thread running the request; anywhere else (or for an exchange the
// auth layer never saw) it answers an anonymous, non-admin caller.
const Caller& CallerOf(const Exchange& ex);
// Records the caller of `ex`; the auth layer calls it for EVERY request
// (with an empty Caller for anonymous ones), since it replaces the previous
// request's caller on this thread.
void SetCaller(Exchange& ex, Caller caller);

// The token of an "Authorization: Bearer X" header: the scheme in any case,
// spaces around the token trimmed. Null for other schemes or no token.
std::optional<std::string> BearerToken(const std::string& authorization_header);

}  // namespace kiln::api
