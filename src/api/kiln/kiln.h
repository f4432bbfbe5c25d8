// kiln's own API as a front of kilnd: the /v1 routes that kiln's CLI and
// SDKs, Runtime's `withruntime` client and the console speak
// (docs/api.md), and the host names {port}-{id}.{domain} that reach a
// sandbox's ports and previews. Like every front, it only reads requests
// (requests.h), calls the services of ApiContext (launch::Launcher,
// io::Service, control::SandboxManager, ImageManager) and renders their
// answers (presenters.h). Its errors are the API's standard shape, ApiFront's
// default (errors.h). Its namespace is kiln::api::v1, after its prefix
// (kiln::api::kiln would hide kiln:: from every name looked up inside).
#pragma once

#include "api/context.h"
#include "api/router.h"

namespace kiln::api::v1 {

// Registers every /v1 route but the OpenAPI document (openapi.h), which is
// registered after every front's routes.
void AddKilnRoutes(Router& r, ApiContext& ctx);
// Serves `ex` if its Host names a sandbox's port ({port}-{id}.{domain}):
// with a kiln key, a preview's token, or nothing for a public preview.
// False if it names none.
bool ServePortHost(ApiContext& ctx, Exchange& ex);

}  // namespace kiln::api::v1
