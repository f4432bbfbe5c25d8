// API key routes: POST /v1/keys, GET /v1/keys, POST /v1/keys/{id}:revoke.
#pragma once

#include "api/kiln/routes.h"
#include "api/router.h"

namespace kiln::api {

// Admin keys only. Needs ctx.keys (a store::KeyStore&) and the auth layer
// calling SetCaller (api/auth.h) before dispatch.
void AddKeyRoutes(Router& r, ApiContext& ctx);

}  // namespace kiln::api
