// E2B's API as a third front of kilnd, so that E2B's own SDKs (e2b,
// e2b-code-interpreter, in Python and JavaScript) drive kiln sandboxes:
//   E2B_API_URL=http://HOST:7070/e2b              the control plane (REST)
//   E2B_SANDBOX_URL=http://HOST:7070/e2b/sandbox  inside a sandbox, routed
//       by the E2b-Sandbox-Id and E2b-Sandbox-Port headers the SDKs send;
//       or by host name, {port}-{id}.{--preview-domain}.
// Port 49983 is envd (Connect RPC for processes and files, /files), served
// by kilnd itself over kiln's io services; 49999 is the code interpreter,
// served by kiln's interpreter; any other port is relayed to the sandbox's
// own server (api/port_proxy.h). Every create goes through
// launch::Launcher, as every front's does.
// docs/api.md ("E2B's SDKs") lists what is served and refused.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "api/context.h"
#include "api/front.h"
#include "api/router.h"

namespace kiln::api {

// Registers every /e2b control-plane route, refusals included.
void AddE2bRoutes(Router& r, ApiContext& ctx);
// The sandbox plane: /e2b/sandbox/... with E2B's headers, or the host name
// {port}-{id}.{domain} with E2B's credentials. False if `ex` is neither.
bool ServeE2bSandbox(ApiContext& ctx, Exchange& ex);
// Where E2B's clients put the key (X-API-Key, e2b_<hex>) and how they read
// errors ({"code": status, "message": ...}).
ApiFront::Dialect E2bDialect();

namespace e2b {

inline constexpr const char* kPrefix = "/e2b";
inline constexpr const char* kSandboxPrefix = "/e2b/sandbox";
// Template files' upload links: signed, not keyed (templates.h).
inline constexpr const char* kUploadPrefix = "/e2b/template-uploads/";
inline constexpr int kEnvdPort = 49983;
inline constexpr int kInterpreterPort = 49999;
// The sandbox user's home in E2B's templates (and as E2B's clients see
// kiln's base, which links it to /workspace).
inline constexpr const char* kE2bHome = "/home/user";
// The envd version kiln reports: the SDKs pick features by it (0.5.7
// gzip'ed uploads, 0.6.2 file metadata, 0.6.3 watch events' entries, 0.6.4
// watches allowed on network mounts).
inline constexpr const char* kEnvdVersion = "0.6.4";
// Where envd keeps a file's metadata: its extended attributes under this.
inline constexpr std::string_view kEnvdMetadataXattrPrefix = "user.e2b.";

// A kiln key as E2B's clients must spell it: "kiln_<hex>" is "e2b_<hex>".
// nullopt for anything that is not e2b_ followed by hex digits.
std::optional<std::string> KilnKeyFromE2b(const std::string& key);
std::string E2bKeyFromKiln(const std::string& key);

// The sandbox's tokens (HMAC under ctx.sandbox_token_key): envd's
// X-Access-Token, and E2B-Traffic-Access-Token for its other ports.
std::string EnvdAccessToken(const ApiContext& ctx, const std::string& sandbox_id);
std::string TrafficAccessToken(const ApiContext& ctx, const std::string& sandbox_id);

// E2B's error body, {"code": http_status, "message": ...}, and the status.
nlohmann::json ErrorBody(int http_status, const Status& s);
int HttpStatus(const Status& s);
// Answers `s` in E2B's shape; nothing if an answer already began. The
// control plane's routes throw and E2bDialect answers with this; the
// sandbox plane, which no prefix owns, answers with it itself.
void SendError(Exchange& ex, const Status& s);

}  // namespace e2b
}  // namespace kiln::api
