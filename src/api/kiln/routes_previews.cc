// Previews (the reference's §1.13): a sandbox's port shared at its own
// host name, {port}-{sandbox}.{domain}, private (a token is needed) or, if
// kilnd allows it, public. Requests to those host names are served here too
// (ServePortHost): with a kiln key, a preview's token, or nothing for a
// public one, then relayed like any port request (api/port_proxy.h).
#include "api/errors.h"
#include "api/kiln/kiln.h"
#include "api/kiln/presenters.h"
#include "api/kiln/requests.h"
#include "api/kiln/routes.h"
#include "api/kiln/terminal.h"
#include "common/time.h"

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

// Where a visitor's token may come from, besides the query of urlWithToken.
constexpr const char* kTokenHeaders[] = {"x-kiln-preview-token", "x-runtime-preview-token",
                                         "x-daytona-preview-token"};
constexpr const char* kTokenCookie = kPreviewTokenCookie;
constexpr const char* kTokenQuery = kPreviewTokenQuery;

control::Previews& Previews(ApiContext& ctx) {
  if (!ctx.previews) throw ApiError(Code::kNotSupported, "previews are not served here");
  return *ctx.previews;
}

store::PreviewRecord FindPreview(ApiContext& ctx, const control::Sandbox& s, int port) {
  auto p = Previews(ctx).Find(s.id(), port);
  if (!p)
    throw ApiError(Code::kNotFound,
                   "port " + std::to_string(port) + " of sandbox " + s.id() + " has no preview");
  return *p;
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
    PreviewRequest req = ReadPreview(ex.JsonBody());
    ThrowIfError(Previews(ctx).MayShare(req.is_public));  // refused before the expiry is read
    auto expiry = ReadPreviewExpiry(req.ttl_s, req.expires_at, "body");
    auto p = ValueOrThrow(Previews(ctx).Share(s->id(), req.port, req.is_public, req.ttl_ms));
    ex.SendJson(200, PreviewJson(ctx.ports, p, expiry));
  });

  r.Add("GET", "/v1/sandboxes/{id}/previews", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json data = json::array();
    for (const auto& p : Previews(ctx).List(s->id()))
      data.push_back(PreviewJson(ctx.ports, p, std::nullopt));
    ex.SendJson(200, ListJson(std::move(data)));
  });

  r.Add("GET", "/v1/sandboxes/{id}/previews/{port}", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    int port = ReadPortParam(ex);
    auto expiry = ReadPreviewExpiryQuery(ex);
    ex.SendJson(200, PreviewJson(ctx.ports, FindPreview(ctx, *s, port), expiry));
  });

  r.Add("POST", "/v1/sandboxes/{id}/previews/{port}:rotate", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    int port = ReadPortParam(ex);
    FindPreview(ctx, *s, port);
    Previews(ctx).Rotate(s->id(), port);
    ex.SendJson(200, PreviewJson(ctx.ports, FindPreview(ctx, *s, port), std::nullopt));
  });

  r.Add("DELETE", "/v1/sandboxes/{id}/previews/{port}", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    int port = ReadPortParam(ex);
    auto p = FindPreview(ctx, *s, port);
    Previews(ctx).Revoke(s->id(), port);
    ex.SendJson(200, DeletedPreviewJson(p));
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
    // A sandbox whose key was revoked is reached by no preview: its tokens
    // and public links die with the key that made them.
    std::optional<control::Previews::Entrance> entrance;
    if (s && ctx.previews) entrance = ctx.previews->Enter(id, s->spec().owner, port);
    if (!entrance) throw no_preview();
    const store::PreviewRecord* p = &entrance->preview;
    if (!p->is_public) {
      std::string token;
      for (const char* h : kTokenHeaders)
        if (token.empty()) token = ex.Header(h);
      std::optional<std::string> from_query = ex.Query(kTokenQuery);
      if (token.empty() && from_query) token = *from_query;
      bool from_cookie = false;
      if (token.empty()) {
        token = control::Previews::PickToken(*p, CookieValues(ex.Header("Cookie"), kTokenCookie),
                                             NowMs());
        from_cookie = !token.empty();
      }
      if (!control::Previews::TokenValid(*p, token, NowMs()))
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
    SetCaller(ex, Caller{s->spec().owner, false, entrance->owner.daily_limit_micros});
  }
  ex.activity = control::Sandbox::Use(s, StableNowMs());
  io::SandboxIo io = RunningIo(ctx, ex, *s);
  auto slot = OpenPortConnection(ctx, *s);
  req.target = WithoutTokenQuery(ex.raw_target());
  req.registry = ctx.relays;
  req.registry_key = RelayKey(id, port);
  ProxyHttp(ex, io, req);
  return true;
}

}  // namespace kiln::api::v1
