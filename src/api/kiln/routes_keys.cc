// API keys: POST /v1/keys, GET /v1/keys, POST /v1/keys/{id}:revoke.
//
// Written against two things the daemon wiring provides: ApiContext has a
// member `store::KeyStore& keys`, and the auth layer calls SetCaller (see
// api/auth.h) for every request before the router dispatches it.
#include "api/kiln/routes_keys.h"

#include <cstdint>
#include <limits>

#include "api/auth.h"
#include "api/errors.h"
#include "api/kiln/presenters.h"
#include "api/validate.h"
#include "store/key_store.h"

namespace kiln::api {

using nlohmann::json;

namespace {

// Keys can mint keys, so only an admin may see or touch them.
void RequireAdmin(const Exchange& ex) {
  if (!CallerOf(ex).admin) throw ApiError(Code::kForbidden, "managing API keys needs an admin key");
}

}  // namespace

void AddKeyRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/v1/keys", [&ctx](Exchange& ex) {
    RequireAdmin(ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    std::string name = f.String("name", 128).value_or("");
    // It is printed in `kiln keys ls` tables: no terminal control codes.
    for (unsigned char c : name) {
      if (c < 0x20 || c == 0x7f) {
        f.Issue("name", "must not contain control characters");
        break;
      }
    }
    auto limit = f.Int("dailyLimitMicros", 0, std::numeric_limits<int64_t>::max());
    bool admin = f.Bool("admin").value_or(false);
    f.Finish();
    auto [key, secret] = ctx.keys.Create(name, admin, limit);
    json out = ApiKeyJson(key);
    out["secret"] = secret;  // the only time it is ever shown
    ex.SendJson(201, out);
  });

  r.Add("GET", "/v1/keys", [&ctx](Exchange& ex) {
    RequireAdmin(ex);
    json data = json::array();
    for (const auto& k : ctx.keys.List()) data.push_back(ApiKeyJson(k));
    ex.SendJson(200, json{{"data", data}});
  });

  r.Add("POST", "/v1/keys/{id}:revoke", [&ctx](Exchange& ex) {
    RequireAdmin(ex);
    FieldReader(ex.JsonBody()).Finish();
    const std::string& id = ex.params["id"];
    if (!ctx.keys.Revoke(id)) throw NotFound("key " + id);
    auto key = ctx.keys.Get(id);
    if (!key) throw NotFound("key " + id);
    ex.SendJson(200, ApiKeyJson(*key));
  });
}

}  // namespace kiln::api
