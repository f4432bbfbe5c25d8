// E2B's control plane under /e2b (see e2b.h).
#include "api/e2b/e2b.h"

namespace kiln::api {

void AddE2bRoutes(Router& r, ApiContext& ctx) {
  (void)r;
  (void)ctx;
}

}  // namespace kiln::api
