// What every front (kiln's /v1, PandaStack's, the ones to come) shares
// below its own wire shapes: the services the routes call (ApiContext), a
// caller's sandbox or snapshot found under its key's scope, stream slots,
// the spending limit and the way into a running sandbox (io).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "api/auth.h"
#include "api/port_proxy.h"
#include "api/router.h"
#include "api/stream_limit.h"
#include "api/terminal_tickets.h"
#include "control/egress_log.h"
#include "control/keys.h"
#include "control/previews.h"
#include "control/sandbox_manager.h"
#include "io/service.h"
#include "launch/launcher.h"

namespace kiln::images {
class ImageManager;
class StagedBuilds;
class FrontImages;
class PulledImages;
class BuiltImages;
}  // namespace kiln::images

namespace kiln::api {

// How ports are reached from outside: previews' host names and what may
// be shared (kilnd's flags).
struct PortSettings {
  // Host names {port}-{sandbox}.{domain} reach a port; "localhost" by
  // default, which browsers and curl resolve to loopback.
  std::string domain = "localhost";
  // How a preview's URL starts and ends around the host name:
  // "http://" + host + ":7070/" by default (kilnd's listener).
  std::string url_scheme = "http";
  std::string url_port;                  // "" for the scheme's default port
  int relay_idle_ms = 600000;            // --relay-idle-seconds
  StreamLimiter* connections = nullptr;  // per sandbox; null: no cap
};

// A preview's URL: scheme://{port}-{sandbox}.{domain}[:port]/.
std::string PreviewUrl(const PortSettings& ports, const std::string& sandbox_id, int port);

// The services a front's routes call, and nothing else: no store is
// reached from a route (each rule lives in the service that owns it).
struct ApiContext {
  control::SandboxManager& sandboxes;
  launch::Launcher& launcher;              // every front's creates (launch/launcher.h)
  io::Service& io;                         // every front's I/O into a sandbox (io/service.h)
  control::Keys& keys;                     // API keys, and what dies with one (control/keys.h)
  const control::EgressLog& egress_log;    // sandboxes' egress logs, by page
  images::ImageManager* images = nullptr;  // null: no image routes (unit tests)
  StreamLimiter* streams = nullptr;        // null: streams are not capped
  control::Previews* previews = nullptr;   // null: no previews (unit tests)
  PortSettings ports;
  // Open port connections, registered by the relays (kilnd's previews
  // service cuts them when a preview narrows or ends).
  RelayRegistry* relays = nullptr;
  // Signs E2B's per-sandbox access tokens (SecretBox::Derive); "" refuses
  // every token.
  std::string sandbox_token_key;
  TerminalTickets* tickets = nullptr;  // null: no terminal tickets
  // Builds that arrive in parts (vendors' template builds); null: refused.
  images::StagedBuilds* staged_builds = nullptr;
  // The fronts' default images, built on first need; null: only those an
  // operator built.
  images::FrontImages* front_images = nullptr;
  // OCI references a front boots as they are, pulled on first need as the
  // caller's image; null: refused.
  images::PulledImages* pulled_images = nullptr;
  // Dockerfiles a front boots as they are (Daytona's buildInfo), built on
  // first need as the caller's image; null: refused.
  images::BuiltImages* built_images = nullptr;
  // E2B's creates: the metadata key naming the image to boot (slime's
  // image routing, --e2b-image-metadata-key); "" for none.
  std::string e2b_image_metadata_key;
};

// The sandbox named by the {id} parameter; 404 not_found if unknown or
// another key's (an admin key sees every sandbox).
std::shared_ptr<control::Sandbox> FindSandbox(ApiContext& ctx, Exchange& ex);
// The snapshot `id`, under the same rule; 404 snapshot_not_found.
store::SnapshotRecord FindSnapshot(ApiContext& ctx, const Exchange& ex, const std::string& id);
// Whose resources the caller may see: nullopt for an admin (everyone's).
std::optional<std::string> OwnerScope(const Exchange& ex);

// An image a front's flag names (SandboxFusion's language image, E2B's
// code-interpreter-v1) as the caller reaches it: the caller's own image of
// that name, else the operator's, the newest an admin key built. An
// operator's image serves every key (its sandboxes are the key's, metered
// and limited as the key's); a key's own replaces it for that key alone.
struct FrontImage {
  std::string id;
  bool operators = false;  // launch with scope nullopt: the key does not own it
};
std::optional<FrontImage> FindFrontImage(ApiContext& ctx, const Exchange& ex,
                                         const std::string& ref);

// The `Prefer: wait=N` header as a deadline (N capped at 120 s; none = now).
control::Deadline PreferWaitDeadline(const Exchange& ex);
// The later of PreferWaitDeadline and now + `room_wait`: how long a vendor
// front's create, fork or wake waits for room before its refusal hands the
// retry to the client.
control::Deadline RoomDeadline(const Exchange& ex, std::chrono::seconds room_wait);

// A launch for `ex`'s caller, the one way every front fills one: `spec`
// owned by the caller's key, images and snapshots seen under its scope
// (OwnerScope), its key's daily spending limit, the deadline
// RoomDeadline(ex, room_wait) (PreferWaitDeadline for none), cancelled when
// the client hangs up. The front then names what to boot.
launch::LaunchRequest LaunchFor(Exchange& ex, control::SandboxSpec spec,
                                std::chrono::seconds room_wait = std::chrono::seconds(0));
// Has `req` boot the front's image `ref` as `ex`'s caller reaches it
// (FindFrontImage): the key's own, else the operator's, which is launched
// unscoped (the key does not own it). With neither, one kilnd ships or the
// operator defined (images::FrontImages) is built now, the create waiting
// for it until req.deadline (then ApiError no_capacity, Retry-After); else
// `ref` itself, which the launch then answers image_not_found for.
void LaunchFrontImage(ApiContext& ctx, const Exchange& ex, const std::string& ref,
                      launch::LaunchRequest& req);
// A slot for one long-lived stream on `s` (exec stream, output follow,
// terminal, download), held until the returned handle goes; 429
// too_many_streams, naming the cap, when its streams are at the cap.
std::shared_ptr<void> OpenStream(ApiContext& ctx, const control::Sandbox& s);
// A slot for one connection into `s`'s ports; 429 too_many_streams at the
// cap (--max-port-connections).
std::shared_ptr<void> OpenPortConnection(ApiContext& ctx, const control::Sandbox& s);

// I/O into `s` for `ex`'s caller (io::Service::Reach): a paused sandbox is
// woken first when its autoWake is on; else ApiError sandbox_paused or
// not_running.
io::SandboxIo RunningIo(ApiContext& ctx, Exchange& ex, const control::Sandbox& s);
// Who pays for what `ex` starts (launch::Launcher's Fork, Wake, Extend
// check its spending limit): the caller's key.
launch::Payer PayerOf(const Exchange& ex);

// {port}-{sandbox} of a Host header under the ports' domain; false if the
// host is not one.
bool ParsePortHost(const ApiContext& ctx, std::string host, int* port, std::string* id);

// An optional integer query parameter in [min, max]; 400 naming it otherwise.
int64_t QueryInt(Exchange& ex, const std::string& name, int64_t min, int64_t max, int64_t def);

// A required, absolute path from the query string.
std::string QueryPath(Exchange& ex, const std::string& name = "path");

}  // namespace kiln::api
