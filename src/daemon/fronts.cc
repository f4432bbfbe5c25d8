#include "daemon/fronts.h"

#include <string>

#include "api/console/routes.h"
#include "api/daytona/daytona.h"
#include "api/e2b/e2b.h"
#include "api/kiln/kiln.h"
#include "api/kiln/openapi.h"
#include "api/pandastack/pandastack.h"

namespace kiln::daemon {

void AddFrontRoutes(api::Router& router, api::ApiContext& ctx,
                    const api::SandboxFusionOptions& sandboxfusion,
                    const api::ConsoleFiles& console) {
  api::v1::AddKilnRoutes(router, ctx);
  api::AddPandaStackRoutes(router, ctx);
  api::AddDaytonaRoutes(router, ctx);
  api::AddE2bRoutes(router, ctx);
  api::AddSandboxFusionRoutes(router, ctx, sandboxfusion);
  api::AddConsoleRoutes(router, console);
  api::v1::AddOpenApiRoutes(router);  // last: it documents every front's routes
}

void ConfigureFront(api::ApiFront& front, api::ApiContext& ctx) {
  front.SetHostHandler(
      [&ctx](const api::Exchange& ex) {
        const std::string& path = ex.path();
        const std::string plane = api::e2b::kSandboxPrefix;
        int port = 0;
        std::string id;
        return path == plane || path.starts_with(plane + "/") ||
               api::ParsePortHost(ctx, ex.Header("Host"), &port, &id);
      },
      [&ctx](api::Exchange& ex) {
        if (!api::ServeE2bSandbox(ctx, ex)) api::v1::ServePortHost(ctx, ex);
      });
  // Each vendor front's one error shape and key spelling (kiln's own: the rest).
  front.AddDialect(api::E2bDialect());
  front.AddDialect(api::PandaStackDialect());
  front.AddDialect(api::DaytonaDialect());
  front.AddDialect(api::SandboxFusionDialect());
  front.AcceptTerminalTickets(ctx.tickets);
  front.AcceptSignedLinks(api::e2b::kUploadPrefix);
}

}  // namespace kiln::daemon
