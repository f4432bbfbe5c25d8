#include "api/auth.h"

#include <strings.h>

#include <string_view>
#include <utility>

namespace kiln::api {

namespace {

// The HTTP server runs each request start to end on one thread (a thread
// per connection), so one slot per thread holds the current caller: nothing
// is added to Exchange, and nothing outlives the thread. Keep-alive requests
// reuse the slot (and possibly the Exchange's address), which is why the
// auth layer must set it for every request. The exchange pointer only
// guards against reading the slot for an exchange it was not set for.
struct CurrentCaller {
  const Exchange* ex = nullptr;
  Caller caller;
};
thread_local CurrentCaller current;

}  // namespace

const Caller& CallerOf(const Exchange& ex) {
  static const Caller kAnonymous;  // fail closed: no key, not admin
  return current.ex == &ex ? current.caller : kAnonymous;
}

void SetCaller(Exchange& ex, Caller caller) {
  current.ex = &ex;
  current.caller = std::move(caller);
}

std::optional<std::string> BearerToken(const std::string& authorization_header) {
  constexpr std::string_view kSpace = " \t";
  const std::string& h = authorization_header;
  size_t start = h.find_first_not_of(kSpace);
  if (start == std::string::npos) return std::nullopt;
  constexpr std::string_view kScheme = "bearer";
  if (h.size() - start <= kScheme.size() ||
      strncasecmp(h.c_str() + start, kScheme.data(), kScheme.size()) != 0)
    return std::nullopt;
  size_t after = start + kScheme.size();
  // "Bearerx" is another scheme, not "Bearer" with token "x".
  if (kSpace.find(h[after]) == std::string_view::npos) return std::nullopt;
  size_t b = h.find_first_not_of(kSpace, after);
  if (b == std::string::npos) return std::nullopt;
  size_t e = h.find_last_not_of(kSpace);
  return h.substr(b, e - b + 1);
}

}  // namespace kiln::api
