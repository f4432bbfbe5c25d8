// API keys: POST /v1/keys, GET /v1/keys, POST /v1/keys/{id}:revoke.
//
// Written against two things the daemon wiring provides: ApiContext has a
// member `control::Keys& keys` (control/keys.h), and the auth layer calls
// SetCaller (see api/auth.h) for every request before the router
// dispatches it.
#include "api/errors.h"
#include "api/kiln/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/requests.h"
#include "api/kiln/routes.h"

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

// Keys can mint keys, so only an admin may see or touch them.
constexpr const char* kAdminOnly = "managing API keys needs an admin key";

}  // namespace

void AddKeyRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/v1/keys", [&ctx](Exchange& ex) {
    RequireAdmin(ex, kAdminOnly);
    KeyRequest req = ReadKey(ex.JsonBody());
    auto [key, secret] = ctx.keys.Create(req.name, req.admin, req.daily_limit_micros);
    ex.SendJson(201, NewApiKeyJson(key, secret));
  });

  r.Add("GET", "/v1/keys", [&ctx](Exchange& ex) {
    RequireAdmin(ex, kAdminOnly);
    json data = json::array();
    for (const auto& k : ctx.keys.List()) data.push_back(ApiKeyJson(k));
    ex.SendJson(200, ListJson(std::move(data)));
  });

  r.Add("POST", "/v1/keys/{id}:revoke", [&ctx](Exchange& ex) {
    RequireAdmin(ex, kAdminOnly);
    FieldReader(ex.JsonBody()).Finish();
    const std::string& id = ex.params["id"];
    auto key = ctx.keys.Revoke(id);
    if (!key) throw NotFound("key " + id);
    ex.SendJson(200, ApiKeyJson(*key));
  });
}

}  // namespace kiln::api::v1
