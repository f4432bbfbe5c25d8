// HTTP into a sandbox's port: one request relayed to a server listening
// inside (through the agent: io::SandboxIo::DialPort) and its answer
// relayed back as it comes, bytes for bytes. Every front that reaches a
// port by HTTP uses it: kiln's /v1/sandboxes/{id}/ports/{port}/...,
// previews on their own host names, E2B's envd and interpreter ports.
//
// The request's head is written again (Beast) with the target the server
// should see, hop-by-hop headers dropped and X-Forwarded-* added; its body
// streams as it arrives. No kiln or E2B credential ever reaches the server,
// whoever sent it and whatever the front (KilnCredentialHeader): the
// sandbox may be the policy's, root inside, and a visitor's key must not
// become its key. The server is asked to close after its answer
// (Connection: close), so the answer's end is the connection's end and
// kiln parses nothing of it; the client's connection closes then too. An
// Upgrade (WebSocket) request keeps its Upgrade and Connection headers, and
// after the server's 101 both sides' bytes flow until either ends.
//
// Nothing holds a relay for good: a plain request whose client leaves is
// cut from the server at once, an upgraded one gets kAfterClientEndMs to
// finish, and no byte either way for the request's idle time cuts either.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "api/http_server.h"
#include "io/sandbox_io.h"

namespace kiln::api {

// The relays open now, by RelayKey, so that ending a preview cuts its
// connections.
class RelayRegistry {
 public:
  // Registers `conn` under `key` until the handle goes.
  std::shared_ptr<void> Add(const std::string& key, io::PortConnection* conn);
  // Cancels every connection under `key`.
  void Cut(const std::string& key);

 private:
  std::mutex mu_;
  std::map<std::string, std::set<io::PortConnection*>> open_;
};

// The cookie a preview's token rides in (set by kilnd for its host name).
inline constexpr char kPreviewTokenCookie[] = "kiln_preview_token";

// Whether a request header (`name` lowercase) carries a credential of
// kiln's or E2B's: a kiln key in Authorization (Bearer kiln_... or
// e2b_...), X-API-Key, a preview token, E2B's access tokens. Never relayed.
bool KilnCredentialHeader(const std::string& name, const std::string& value);

struct ProxyRequest {
  int port = 0;
  std::string target;  // what the server sees: "/path?query"
  // More headers (lowercase) not to pass on: a front's own addressing.
  std::vector<std::string> drop_headers;
  std::string forwarded_prefix;  // X-Forwarded-Prefix, "" for none
  int idle_ms = 600000;          // no byte either way for this long ends it
  // Where the connection is registered while it is open (may be null).
  RelayRegistry* registry = nullptr;
  std::string registry_key;  // RelayKey(sandbox, port)
};

// The key a relay into `port` of `sandbox_id` is registered under.
inline std::string RelayKey(const std::string& sandbox_id, int port) {
  return sandbox_id + "|" + std::to_string(port);
}

// How long the sandbox's server may take to accept the connection.
inline constexpr int kPortDialMs = 10000;
// How long an upgraded stream's server may go on after its client ended.
inline constexpr int kAfterClientEndMs = 30000;

// Relays ex to the port. Throws ApiError (port_closed, not_running, ...)
// while nothing has been sent to the client; after that, a failure ends the
// client's connection.
void ProxyHttp(Exchange& ex, const io::SandboxIo& io, const ProxyRequest& request);

// The target `raw` ("/v1/sandboxes/ID/ports/80/a/b?q") has after its first
// `segments` path segments ("/a/b?q"; "/" or "/?q" when nothing follows).
std::string TargetAfterSegments(const std::string& raw, int segments);

}  // namespace kiln::api
