// The fronts kilnd serves, registered in one place: kiln's /v1, PandaStack's,
// E2B's, SandboxFusion's and the console, each with its one registration
// (docs/design.md, "The shape of a front"), and the edge they share
// (api::ApiFront) told which requests are whose.
#pragma once

#include "api/console/console_files.h"
#include "api/context.h"
#include "api/front.h"
#include "api/router.h"
#include "api/sandboxfusion/sandboxfusion.h"

namespace kiln::daemon {

// Every front's routes on `router`, in the order the router tries them;
// the OpenAPI document last, since it lists them all.
void AddFrontRoutes(api::Router& router, api::ApiContext& ctx,
                    const api::SandboxFusionOptions& sandboxfusion,
                    const api::ConsoleFiles& console);

// The edge's view of the fronts: host-routed requests (E2B's sandbox
// plane, a port by {port}-{id}.{domain}) go to their handler, each vendor
// front's prefix to its Dialect (its clients' key and error shape; kiln's
// own is the rest), terminal tickets in place of a key.
void ConfigureFront(api::ApiFront& front, api::ApiContext& ctx);

}  // namespace kiln::daemon
