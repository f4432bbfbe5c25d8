// Previews (the reference's §1.13): a sandbox's port shared at its own
// host name, {port}-{sandbox}.{domain}, private (a token is needed) or, if
// kilnd allows it, public. Requests to those host names are served here too
// (ServePortHost): with a kiln key, a preview's token, or nothing for a
// public one, then relayed like any port request (api/port_proxy.h).
#include <algorithm>
#include <cctype>

#include "api/errors.h"
#include "api/kiln/routes.h"
#include "api/kiln/terminal.h"
#include "common/time.h"

namespace kiln::api {

using nlohmann::json;

namespace {

constexpr int64_t kDayMs = 86400000;
constexpr int64_t kMinTtlMs = 60000, kMaxTtlMs = 7 * kDayMs, kDefaultTtlMs = kDayMs;
// Where a visitor's token may come from, besides the query of urlWithToken.
constexpr const char* kTokenHeaders[] = {"x-kiln-preview-token", "x-runtime-preview-token"};
constexpr const char* kTokenCookie = kPreviewTokenCookie;
constexpr char kTokenQuery[] = "kiln_preview_token";

json PreviewJson(const ApiContext& ctx, const store::PreviewRecord& p,
                 std::optional<int64_t> expiry_ms) {
  std::string url = PreviewUrl(ctx.ports, p.sandbox_id, p.port);
  json j = {{"id", p.id},
            {"sandboxId", p.sandbox_id},
            {"port", p.port},
            {"visibility", p.is_public ? "public" : "private"},
            {"url", url},
            {"token", nullptr},
            {"tokenExpiresAt", nullptr},
            {"urlWithToken", url},
            {"disabled", false},
            {"embedOrigins", json::array()},
            {"createdAt", FormatTime(p.created_ms)}};
  if (!p.is_public) {
    int64_t expiry = expiry_ms.value_or(NowMs() + p.ttl_ms);
    std::string token = store::PreviewStore::Token(p, expiry);
    j["token"] = token;
    j["tokenExpiresAt"] = FormatTime(expiry);
    j["urlWithToken"] = url + "?" + kTokenQuery + "=" + token;
  }
  return j;
}

// A token's expiry from ttlSeconds / expiresAt (the earlier bound wins).
std::optional<int64_t> ReadExpiry(std::optional<int64_t> ttl_s,
                                  const std::optional<std::string>& expires_at,
                                  const std::string& where) {
  std::optional<int64_t> expiry;
  if (ttl_s) expiry = NowMs() + *ttl_s * 1000;
  if (expires_at) {
    auto at = ParseTime(*expires_at);
    if (!at || *at <= NowMs() || *at > NowMs() + kMaxTtlMs)
      throw InvalidField(where + ".expiresAt", "must be an RFC 3339 time in the next 7 days");
    expiry = expiry ? std::min(*expiry, *at) : *at;
  }
  return expiry;
}

store::PreviewStore& Previews(ApiContext& ctx) {
  if (!ctx.previews) throw ApiError(Code::kNotSupported, "previews are not served here");
  return *ctx.previews;
}

store::PreviewRecord FindPreview(ApiContext& ctx, const control::Sandbox& s, int port) {
  auto p = Previews(ctx).Get(s.id(), port);
  if (!p)
    throw ApiError(Code::kNotFound,
                   "port " + std::to_string(port) + " of sandbox " + s.id() + " has no preview");
  return *p;
}

int PreviewPort(Exchange& ex) {
  const std::string& v = ex.params["port"];
  int port = 0;
  bool digits = !v.empty() && v.size() <= 5 &&
                std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits) port = std::stoi(v);
  if (port < 1 || port > 65535)
    throw InvalidField("path.port", "must be a port number from 1 to 65535");
  return port;
}

// Every value of cookie `name` in a Cookie header, in order: a page of
// another preview (the same site) may plant one of that name beside the
// visitor's, so none is taken for the only one.
std::vector<std::string> CookieValues(const std::string& header, const std::string& name) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < header.size()) {
    size_t end = header.find(';', at);
    std::string pair = header.substr(at, end == std::string::npos ? std::string::npos : end - at);
    size_t start = pair.find_first_not_of(' ');
    if (start != std::string::npos && pair.compare(start, name.size() + 1, name + "=") == 0)
      out.push_back(pair.substr(start + name.size() + 1));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return out;
}

// Whether the browser says this request was made by another site's page,
// another preview's among them (every preview host is one site, so
// SameSite=Lax lets its cookies ride along), other than by following a
// link: a cookie must not let such a request in (Fetch Metadata's
// resource isolation). Clients that send no Sec-Fetch-* (curl) are not
// browsers and are let in.
bool CrossSiteSubrequest(const Exchange& ex) {
  std::string site = ex.Header("Sec-Fetch-Site");
  if (site != "same-site" && site != "cross-site") return false;
  bool navigation =
      ex.Header("Sec-Fetch-Mode") == "navigate" && (ex.method() == "GET" || ex.method() == "HEAD");
  return !navigation;
}

// The raw target without the token's query parameter.
std::string WithoutTokenQuery(const std::string& raw) {
  size_t q = raw.find('?');
  if (q == std::string::npos) return raw;
  std::string out = raw.substr(0, q), kept;
  size_t at = q + 1;
  while (at <= raw.size()) {
    size_t end = raw.find('&', at);
    std::string part = raw.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (!part.empty() && !part.starts_with(std::string(kTokenQuery) + "="))
      kept += (kept.empty() ? "" : "&") + part;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return kept.empty() ? out : out + "?" + kept;
}

}  // namespace

void AddPreviewRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/v1/sandboxes/{id}/previews", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);  // another key's sandbox is 404 before its fields
    json body = ex.JsonBody();
    FieldReader f(body);
    auto port = f.Int("port", 1, 65535);
    if (!port && !f.has("port")) f.Issue("body.port", "is required");
    auto visibility = f.String("visibility", 16);
    if (visibility && *visibility != "private" && *visibility != "public")
      f.Issue("body.visibility", "must be private or public");
    auto ttl_s = f.Int("ttlSeconds", kMinTtlMs / 1000, kMaxTtlMs / 1000);
    auto expires_at = f.String("expiresAt", 64);
    if (auto origins = f.StringList("embedOrigins", 16); origins && !origins->empty())
      f.Issue("body.embedOrigins",
              "kiln does not restrict which sites may frame a preview: leave it empty");
    f.Finish();
    bool is_public = visibility && *visibility == "public";
    if (is_public && !ctx.ports.allow_public)
      throw ApiError(Code::kForbidden,
                     "body.visibility: public previews are off on this kilnd (start it with "
                     "--allow-public-previews); share it privately, with its token");
    auto expiry = ReadExpiry(ttl_s, expires_at, "body");
    int64_t ttl_ms = ttl_s ? *ttl_s * 1000 : kDefaultTtlMs;
    auto p = Previews(ctx).Put(s->id(), static_cast<int>(*port), is_public, ttl_ms);
    // Made public: whoever holds a token of it now holds nothing more. Made
    // private: the open connections of anyone without a token end.
    if (!is_public) ctx.relays->Cut(s->id() + "|" + std::to_string(*port));
    ex.SendJson(200, PreviewJson(ctx, p, expiry));
  });

  r.Add("GET", "/v1/sandboxes/{id}/previews", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json data = json::array();
    for (const auto& p : Previews(ctx).List(s->id())) data.push_back(PreviewJson(ctx, p, {}));
    ex.SendJson(200, json{{"data", data}});
  });

  r.Add("GET", "/v1/sandboxes/{id}/previews/{port}", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    int port = PreviewPort(ex);
    std::optional<int64_t> ttl_s;
    if (ex.Query("ttlSeconds"))
      ttl_s = QueryInt(ex, "ttlSeconds", kMinTtlMs / 1000, kMaxTtlMs / 1000, 0);
    auto expiry = ReadExpiry(ttl_s, ex.Query("expiresAt"), "query");
    ex.SendJson(200, PreviewJson(ctx, FindPreview(ctx, *s, port), expiry));
  });

  r.Add("POST", "/v1/sandboxes/{id}/previews/{port}:rotate", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    int port = PreviewPort(ex);
    FindPreview(ctx, *s, port);
    Previews(ctx).Rotate(s->id(), port);
    ctx.relays->Cut(s->id() + "|" + std::to_string(port));
    ex.SendJson(200, PreviewJson(ctx, FindPreview(ctx, *s, port), {}));
  });

  r.Add("DELETE", "/v1/sandboxes/{id}/previews/{port}", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    int port = PreviewPort(ex);
    auto p = FindPreview(ctx, *s, port);
    Previews(ctx).Delete(s->id(), port);
    ctx.relays->Cut(s->id() + "|" + std::to_string(port));
    ex.SendJson(200, json{{"id", p.id}, {"sandboxId", s->id()}, {"port", port}, {"deleted", true}});
  });
}

bool ServePortHost(ApiContext& ctx, Exchange& ex) {
  int port = 0;
  std::string id;
  if (!ParsePortHost(ctx, ex.Header("Host"), &port, &id)) return false;
  SetCaller(ex, Caller{});
  auto s = ctx.sandboxes.Get(id);
  auto no_preview = [&] {
    return ApiError(Code::kNotFound,
                    "port " + std::to_string(port) + " of sandbox " + id + " has no preview");
  };
  // A sandbox whose key was revoked is reached by no preview: its tokens
  // and public links die with the key that made them.
  std::optional<store::ApiKey> owner;
  if (s) owner = ctx.keys.Get(s->spec().owner);
  bool owner_live = owner && !owner->revoked_ms;
  ProxyRequest req;
  req.port = port;
  req.idle_ms = ctx.ports.relay_idle_ms;
  // A kiln key that may see the sandbox lets its holder in; anything else
  // needs the port's preview. Neither is passed on (port_proxy.h).
  std::optional<store::ApiKey> key;
  if (auto token = BearerToken(ex.Header("Authorization"))) key = ctx.keys.Authenticate(*token);
  if (key && s && (key->admin || s->spec().owner == key->id)) {
    SetCaller(ex, Caller{key->id, key->admin, key->daily_limit_micros});
  } else {
    std::optional<store::PreviewRecord> p;
    if (s && ctx.previews && owner_live) p = ctx.previews->Get(id, port);
    if (!p) throw no_preview();
    if (!p->is_public) {
      std::string token;
      for (const char* h : kTokenHeaders)
        if (token.empty()) token = ex.Header(h);
      std::optional<std::string> from_query = ex.Query(kTokenQuery);
      if (token.empty() && from_query) token = *from_query;
      bool from_cookie = false;
      if (token.empty()) {
        std::vector<std::string> cookies = CookieValues(ex.Header("Cookie"), kTokenCookie);
        for (const std::string& c : cookies)
          if (store::PreviewStore::TokenValid(*p, c, NowMs())) token = c;
        if (token.empty() && !cookies.empty()) token = cookies.front();
        from_cookie = !token.empty();
      }
      if (!store::PreviewStore::TokenValid(*p, token, NowMs()))
        throw ApiError(Code::kUnauthorized, token.empty()
                                                ? "this preview is private: send its token in "
                                                  "x-kiln-preview-token, or open its urlWithToken"
                                                : "the preview token is wrong, expired or rotated");
      if (from_cookie && CrossSiteSubrequest(ex))
        throw ApiError(
            Code::kForbidden,
            "a request from another site's page (Sec-Fetch-Site: " + ex.Header("Sec-Fetch-Site") +
                ") is not let in by the preview's cookie: send the token in "
                "x-kiln-preview-token");
      bool upgrade = IsWebSocketUpgrade(ex.Header("Upgrade"), ex.Header("Connection"));
      if (from_query && !upgrade && (ex.method() == "GET" || ex.method() == "HEAD")) {
        // The link's token becomes a cookie of this host name, and the
        // address bar loses it.
        size_t dot = token.find('.');
        int64_t max_age = (std::stoll(token.substr(0, dot)) - NowMs()) / 1000;
        std::string secure = ctx.ports.url_scheme == "https" ? "; Secure" : "";
        ex.SendBytes(302, "", "text/plain",
                     {{"Location", WithoutTokenQuery(ex.raw_target())},
                      {"Set-Cookie", std::string(kTokenCookie) + "=" + token +
                                         "; Path=/; HttpOnly; SameSite=Lax" + secure +
                                         "; Max-Age=" + std::to_string(max_age)}});
        return true;
      }
    }
    SetCaller(ex, Caller{s->spec().owner, false, owner->daily_limit_micros});
  }
  ex.activity = control::Sandbox::Use(s, StableNowMs());
  io::SandboxIo io = RunningIo(ctx, ex, *s);
  auto slot = OpenPortConnection(ctx, *s);
  req.target = WithoutTokenQuery(ex.raw_target());
  req.registry = ctx.relays;
  req.registry_key = id + "|" + std::to_string(port);
  ProxyHttp(ex, io, req);
  return true;
}

}  // namespace kiln::api
