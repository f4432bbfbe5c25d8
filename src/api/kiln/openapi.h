// kilnd's OpenAPI 3 document: src/api/kiln/openapi.json, compiled in, checked
// against the router it is served from.
#pragma once

#include <nlohmann/json.hpp>

#include "api/router.h"

namespace kiln::api::v1 {

// The text of src/api/kiln/openapi.json (generated into the build at
// configure time).
extern const char kOpenApiJson[];

// The embedded document, info.version set to kilnd's, plus what the router
// says: a routed "METHOD /pattern" the document lacks is added as a minimal
// operation with "x-kiln-undocumented": true, and a documented operation the
// router lacks is listed in the top-level "x-kiln-unrouted" array (absent
// when there is none).
nlohmann::json OpenApiDocument(const Router& router);

// GET /v1/openapi.json. Register it after every front's routes (daemon/main.cc
// does): the document is built from `r` at the first request and then kept.
void AddOpenApiRoutes(Router& r);

}  // namespace kiln::api::v1
