// The code interpreter's port (49999) of E2B's sandboxes (see e2b.h).
#include "api/e2b/e2b.h"
#include "api/e2b/sandbox_plane.h"
#include "api/errors.h"

namespace kiln::api::e2b {

void ServeInterpreterPort(ApiContext&, Exchange&, const SandboxTarget& t) {
  throw ApiError(Code::kNotSupported, "not yet: " + t.path);
}

}  // namespace kiln::api::e2b
