// envd (port 49983) of E2B's sandboxes, served by kilnd (see e2b.h).
#include "api/e2b/e2b.h"
#include "api/e2b/sandbox_plane.h"
#include "api/errors.h"

namespace kiln::api::e2b {

void ServeEnvd(ApiContext&, Exchange&, const SandboxTarget& t) {
  throw ApiError(Code::kNotSupported, "not yet: " + t.path);
}

void SendEnvdError(Exchange& ex, const std::string&, const Status& s) { SendError(ex, s); }

}  // namespace kiln::api::e2b
