// kiln's own front, registered (kiln.h): every resource's routes, in the
// order the router tries them.
#include "api/kiln/routes.h"
#include "api/kiln/kiln.h"

namespace kiln::api::v1 {

void AddKilnRoutes(Router& r, ApiContext& ctx) {
  AddSandboxRoutes(r, ctx);
  AddExecRoutes(r, ctx);
  AddProcessRoutes(r, ctx);
  AddInterpreterRoutes(r, ctx);
  AddTerminalRoutes(r, ctx);
  AddFileRoutes(r, ctx);
  AddWatchRoutes(r, ctx);
  AddSnapshotRoutes(r, ctx);
  AddSnapshotTransferRoutes(r, ctx);
  AddNetworkRoutes(r, ctx);
  AddPortRoutes(r, ctx);
  AddPreviewRoutes(r, ctx);
  AddKeyRoutes(r, ctx);
  AddImageRoutes(r, ctx);
  AddUsageRoutes(r, ctx);
  AddMetricsRoutes(r, ctx);
}

}  // namespace kiln::api::v1
