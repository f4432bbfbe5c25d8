// The sandbox plane: a request for one of a sandbox's ports, named by
// E2B's headers (E2b-Sandbox-Id, E2b-Sandbox-Port) under /e2b/sandbox, or
// by its host name {port}-{id}.{domain}. It is let in by the sandbox's
// tokens (envd's X-Access-Token; E2B-Traffic-Access-Token for the other
// ports; a file link signed with envd's token, envd/file_signature.h) or by
// a kiln key that sees the sandbox, never by the id alone, then served by
// envd or the interpreter, or relayed to the port.
#include <algorithm>

#include "api/auth.h"
#include "api/e2b/e2b.h"
#include "api/e2b/envd/file_signature.h"
#include "api/e2b/sandbox_plane.h"
#include "api/errors.h"
#include "api/port_proxy.h"
#include "common/digest.h"
#include "common/time.h"

namespace kiln::api {
namespace e2b {
namespace {

constexpr const char* kEnvdTokenHeader = "X-Access-Token";
constexpr const char* kTrafficTokenHeader = "E2B-Traffic-Access-Token";
constexpr const char* kIdHeader = "E2b-Sandbox-Id";
constexpr const char* kPortHeader = "E2b-Sandbox-Port";

int ParsePort(const std::string& text) {
  if (text.empty() || text.size() > 5 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw InvalidField("header." + std::string(kPortHeader),
                       text.empty() ? "is required: the sandbox's port (49983 for envd)"
                                    : "must be a port number 1-65535, not '" + text + "'");
  int port = std::stoi(text);
  if (port < 1 || port > 65535)
    throw InvalidField("header." + std::string(kPortHeader), "must be a port number 1-65535");
  return port;
}

// Whether `ex` may reach `port` of sandbox `id` (`s`, null if there is
// none); sets the caller, or throws. A request with no valid credential is
// 401 whether or not the sandbox exists, and a key that does not own it
// gets the 404 of a missing one: the plane tells nobody which ids are
// live. A token dies with the key that made its sandbox.
// A signed link to envd's /files stands for the envd token: true if `ex`
// is one and its signature holds; throws envd's 401 if it does not.
bool SignedFileLink(ApiContext& ctx, Exchange& ex, const std::string& id, const SandboxTarget& t) {
  auto signature = ex.Query("signature");
  if (!signature || t.port != kEnvdPort || t.path != "/files") return false;
  FileSignature checked = CheckEnvdFileSignature(
      ex.method(), ex.Query("path").value_or(""), ex.Query("username").value_or(""), *signature,
      ex.Query("signature_expiration"), EnvdAccessToken(ctx, id), StableNowMs() / 1000);
  if (checked != FileSignature::kValid) {
    // envd's own body, exactly (E2B's tests compare it whole).
    ex.SendJson(401, nlohmann::json{{"code", 401}, {"message", FileSignatureError(checked)}});
    throw ApiError(Code::kUnauthorized, FileSignatureError(checked));
  }
  return true;
}

void Authorize(ApiContext& ctx, Exchange& ex, const std::string& id, const control::Sandbox* s,
               const SandboxTarget& t) {
  int port = t.port;
  auto matches = [&](const char* header, const std::string& expected) {
    std::string given = ex.Header(header);
    return !given.empty() && ConstantTimeEquals(given, expected);
  };
  std::optional<store::ApiKey> owner;  // live: a token dies with the key that made its sandbox
  if (s) owner = ctx.keys.Live(s->spec().owner);
  bool by_token =
      matches(kEnvdTokenHeader, EnvdAccessToken(ctx, id)) ||
      (port != kEnvdPort && matches(kTrafficTokenHeader, TrafficAccessToken(ctx, id))) ||
      SignedFileLink(ctx, ex, id, t);
  std::optional<store::ApiKey> key;
  if (!by_token) {
    if (auto token = BearerToken(ex.Header("Authorization"))) {
      std::string spelled = KilnKeyFromE2b(*token).value_or(*token);
      key = ctx.keys.Authenticate(spelled);
    }
  }
  auto not_found = [&] { return ApiError(Code::kNotFound, "sandbox " + id + " was not found"); };
  if (key) {
    if (!s || !(key->admin || s->spec().owner == key->id)) throw not_found();
    SetCaller(ex, Caller{key->id, key->admin, key->daily_limit_micros});
    return;
  }
  if (by_token && owner) {
    SetCaller(ex, Caller{s->spec().owner, false, owner->daily_limit_micros});
    return;
  }
  if (by_token && !s) throw not_found();  // its holder knew it: it is gone
  throw ApiError(Code::kUnauthorized,
                 ex.Header(kEnvdTokenHeader).empty() && ex.Header(kTrafficTokenHeader).empty()
                     ? "sandbox " + id + " needs its access token: send " + kEnvdTokenHeader +
                           " (envdAccessToken) or, for ports other than " +
                           std::to_string(kEnvdPort) + ", " + kTrafficTokenHeader
                     : "the access token is not sandbox " + id + "'s, or its key was revoked");
}

void Relay(ApiContext& ctx, Exchange& ex, const SandboxTarget& t) {
  io::SandboxIo io = RunningIo(ctx, ex, *t.sandbox);
  auto slot = OpenPortConnection(ctx, *t.sandbox);
  ProxyRequest req;
  req.port = t.port;
  req.target = t.target;
  req.drop_headers = {"e2b-sandbox-id", "e2b-sandbox-port"};
  req.idle_ms = ctx.ports.relay_idle_ms;
  req.registry = ctx.relays;
  req.registry_key = RelayKey(t.sandbox->id(), t.port);
  try {
    ProxyHttp(ex, io, req);
  } catch (const ApiError& e) {
    // E2B's clients tell "port is not open" (a server not up yet) from a
    // sandbox that is gone by these words.
    if (e.status().code() != Code::kPortClosed) throw;
    throw ApiError(Code::kPortClosed, "the sandbox is running but port " + std::to_string(t.port) +
                                          " is not open: " + e.status().message());
  }
}

void Serve(ApiContext& ctx, Exchange& ex, const std::string& id, SandboxTarget& t) {
  if (id.empty())
    throw InvalidField("header." + std::string(kIdHeader), "is required: the sandbox's id");
  t.sandbox = ctx.sandboxes.Get(id);
  // E2B's clients read "was not found" as a sandbox that is gone.
  Authorize(ctx, ex, id, t.sandbox.get(), t);
  ex.activity = control::Sandbox::Use(t.sandbox, StableNowMs());
  if (t.port == kEnvdPort)
    ServeEnvd(ctx, ex, t);
  else if (t.port == kInterpreterPort)
    ServeInterpreterPort(ctx, ex, t);
  else
    Relay(ctx, ex, t);
}

}  // namespace
}  // namespace e2b

bool ServeE2bSandbox(ApiContext& ctx, Exchange& ex) {
  using namespace e2b;
  const std::string& path = ex.path();
  bool by_path = path == kSandboxPrefix || path.starts_with(std::string(kSandboxPrefix) + "/");
  SandboxTarget t;
  std::string id;
  if (by_path) {
    t.target = TargetAfterSegments(ex.raw_target(), 2);
    id = ex.Header(kIdHeader);
  } else {
    // The host-name form is E2B's when E2B's client sends it: its own
    // ports, or its headers; any other {port}-{id} host is a preview's.
    if (!ParsePortHost(ctx, ex.Header("Host"), &t.port, &id)) return false;
    bool e2b_client = t.port == kEnvdPort || t.port == kInterpreterPort ||
                      !ex.Header(kEnvdTokenHeader).empty() ||
                      !ex.Header(kTrafficTokenHeader).empty() || !ex.Header(kIdHeader).empty();
    if (!e2b_client) return false;
    t.target = ex.raw_target();
  }
  t.path = t.target.substr(0, t.target.find('?'));
  SetCaller(ex, Caller{});
  try {
    if (by_path) {
      t.port = ParsePort(ex.Header(kPortHeader));
    } else if (std::string named = ex.Header(kIdHeader); !named.empty() && named != id) {
      throw InvalidField("header." + std::string(kIdHeader),
                         "names sandbox " + named + " but the host name names " + id);
    }
    Serve(ctx, ex, id, t);
  } catch (const ApiError& e) {
    // is_running() of a sandbox that is gone: E2B's proxy answers 502.
    if (t.port == kEnvdPort && t.path == "/health" && e.status().code() == Code::kNotFound) {
      ex.SendJson(502, nlohmann::json{{"code", 502}, {"message", e.status().message()}});
      return true;
    }
    if (t.port == kEnvdPort)
      SendEnvdError(ex, t.path, e.status());
    else
      SendError(ex, e.status());
  }
  return true;
}

}  // namespace kiln::api
