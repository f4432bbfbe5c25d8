// E2B's errors, keys and tokens (see e2b.h).
#include <cctype>

#include "api/auth.h"
#include "api/e2b/e2b.h"
#include "api/errors.h"
#include "api/front.h"
#include "common/digest.h"

namespace kiln::api {
namespace e2b {

using nlohmann::json;

std::optional<std::string> KilnKeyFromE2b(const std::string& key) {
  static constexpr std::string_view kE2b = "e2b_";
  if (!key.starts_with(kE2b) || key.size() == kE2b.size() || key.size() > 256) return std::nullopt;
  for (size_t i = kE2b.size(); i < key.size(); ++i)
    if (!std::isxdigit(static_cast<unsigned char>(key[i]))) return std::nullopt;
  return "kiln_" + key.substr(kE2b.size());
}

std::string E2bKeyFromKiln(const std::string& key) {
  return key.starts_with("kiln_") ? "e2b_" + key.substr(5) : key;
}

std::string EnvdAccessToken(const ApiContext& ctx, const std::string& sandbox_id) {
  return HmacSha256Hex(ctx.sandbox_token_key, "envd|" + sandbox_id);
}

std::string TrafficAccessToken(const ApiContext& ctx, const std::string& sandbox_id) {
  return HmacSha256Hex(ctx.sandbox_token_key, "traffic|" + sandbox_id);
}

int HttpStatus(const Status& s) {
  // E2B's clients retry 429/502/503/504 on their own; kiln's no_capacity
  // (409 in kiln's API) is one of those here.
  if (s.code() == Code::kNoCapacity) return 503;
  if (s.code() == Code::kNotSupported) return 501;
  return api::HttpStatus(s.code());
}

json ErrorBody(int http_status, const Status& s) {
  json body{{"code", http_status}, {"message", s.message()}, {"kilnCode", CodeName(s.code())}};
  if (!s.details().is_null()) body["details"] = s.details();
  return body;
}

void SendError(Exchange& ex, const Status& s) {
  if (ex.responded()) return;
  int status = HttpStatus(s);
  int retry = s.retry_after_s() > 0 ? s.retry_after_s() : s.code() == Code::kNoCapacity ? 5 : 0;
  if (retry > 0) ex.extra_headers.emplace_back("Retry-After", std::to_string(retry));
  ex.SendJson(status, ErrorBody(status, s));
}

}  // namespace e2b

ApiFront::Dialect E2bDialect() {
  ApiFront::Dialect d;
  d.prefix = std::string(e2b::kPrefix) + "/";
  d.key = [](const Exchange& ex) -> std::optional<std::string> {
    std::string key = ex.Header("X-API-Key");
    if (key.empty()) {
      auto bearer = BearerToken(ex.Header("Authorization"));
      if (!bearer) return std::nullopt;
      key = *bearer;
    }
    // kiln's own spelling is taken as it is; E2B's is turned into it. A
    // key of neither form is still "a key": it fails as unknown.
    if (auto kiln = e2b::KilnKeyFromE2b(key)) return kiln;
    return key;
  };
  d.key_hint = "X-API-Key: e2b_<hex> (a kiln key kiln_<hex>, spelled e2b_<hex>)";
  d.send_error = [](Exchange& ex, const Status& s) { e2b::SendError(ex, s); };
  return d;
}

}  // namespace kiln::api
