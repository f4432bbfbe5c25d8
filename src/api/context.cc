// What every front shares below its own wire shapes: the services behind
// the routes (ApiContext), and finding a caller's sandbox or snapshot.
#include "api/context.h"

#include <algorithm>
#include <cctype>

#include "api/auth.h"
#include "api/errors.h"
#include "common/time.h"
#include "images/manager/front_images.h"
#include "images/manager/image_manager.h"

namespace kiln::api {

using nlohmann::json;
std::optional<std::string> OwnerScope(const Exchange& ex) {
  const Caller& c = CallerOf(ex);
  if (c.admin) return std::nullopt;
  return c.key_id;
}

std::shared_ptr<control::Sandbox> FindSandbox(ApiContext& ctx, Exchange& ex) {
  auto s = ctx.sandboxes.Get(ex.params["id"]);
  auto scope = OwnerScope(ex);
  // Another key's sandbox is answered exactly like a missing one.
  if (!s || (scope && s->spec().owner != *scope)) throw NotFound("sandbox " + ex.params["id"]);
  ex.activity = control::Sandbox::Use(s, StableNowMs());
  return s;
}

std::shared_ptr<void> OpenStream(ApiContext& ctx, const control::Sandbox& s) {
  if (!ctx.streams) return nullptr;
  auto slot = ctx.streams->TryOpen(s.id());
  if (!slot) {
    int cap = ctx.streams->max_per_sandbox();
    throw ApiError(Status(Code::kTooManyStreams,
                          "sandbox " + s.id() + " has " + std::to_string(cap) +
                              " streams open, its cap (--max-streams-per-sandbox); close one first",
                          json{{"limit", cap}})
                       .WithRetryAfter(1));
  }
  return slot;
}

std::string PreviewUrl(const PortSettings& ports, const std::string& sandbox_id, int port) {
  std::string url =
      ports.url_scheme + "://" + std::to_string(port) + "-" + sandbox_id + "." + ports.domain;
  if (!ports.url_port.empty()) url += ":" + ports.url_port;
  return url + "/";
}

std::shared_ptr<void> OpenPortConnection(ApiContext& ctx, const control::Sandbox& s) {
  if (!ctx.ports.connections) return nullptr;
  auto slot = ctx.ports.connections->TryOpen(s.id());
  if (!slot) {
    int cap = ctx.ports.connections->max_per_sandbox();
    throw ApiError(Status(Code::kTooManyStreams,
                          "sandbox " + s.id() + " has " + std::to_string(cap) +
                              " connections open into its ports, its cap "
                              "(--max-port-connections); close one first",
                          json{{"limit", cap}})
                       .WithRetryAfter(1));
  }
  return slot;
}

store::SnapshotRecord FindSnapshot(ApiContext& ctx, const Exchange& ex, const std::string& id) {
  // An image's warm copy is the image's, reached through the image.
  auto rec = ctx.sandboxes.snapshots().FindVisible(id, OwnerScope(ex), control::SnapshotUse::kRead);
  if (!rec) throw ApiError(Code::kSnapshotNotFound, "snapshot " + id + " not found");
  return *rec;
}

std::optional<FrontImage> FindFrontImage(ApiContext& ctx, const Exchange& ex,
                                         const std::string& ref) {
  if (!ctx.images) return std::nullopt;
  auto scope = OwnerScope(ex);
  if (auto own = ctx.images->Resolve(ref, scope); own.ok()) return FrontImage{own->id, false};
  if (!scope) return std::nullopt;  // an admin's lookup above saw every key's
  // The operator's keys, oldest first: the local admin key (kilnd's own) wins.
  for (const store::ApiKey& key : ctx.keys.Operators()) {
    if (auto theirs = ctx.images->Resolve(ref, key.id); theirs.ok())
      return FrontImage{theirs->id, true};
  }
  return std::nullopt;
}

control::Deadline PreferWaitDeadline(const Exchange& ex) {
  auto now = std::chrono::steady_clock::now();
  std::string prefer = ex.Header("Prefer");
  size_t at = prefer.find("wait=");
  if (at == std::string::npos) return now;
  size_t end = prefer.find_first_of(",; ", at);
  std::string value = prefer.substr(at + 5, end == std::string::npos ? end : end - at - 5);
  int64_t seconds = -1;
  try {
    size_t used = 0;
    seconds = std::stoll(value, &used);
    if (used != value.size()) seconds = -1;
  } catch (...) {
  }
  if (seconds < 0) throw InvalidField("header.Prefer", "wait must be a whole number of seconds");
  return now + std::chrono::seconds(std::min<int64_t>(seconds, 120));
}

control::Deadline RoomDeadline(const Exchange& ex, std::chrono::seconds room_wait) {
  return std::max(PreferWaitDeadline(ex), std::chrono::steady_clock::now() + room_wait);
}

launch::LaunchRequest LaunchFor(Exchange& ex, control::SandboxSpec spec,
                                std::chrono::seconds room_wait) {
  const Caller& caller = CallerOf(ex);
  launch::LaunchRequest req;
  req.spec = std::move(spec);
  req.spec.owner = caller.key_id;
  req.scope = OwnerScope(ex);
  req.daily_limit_micros = caller.daily_limit_micros;
  req.deadline = room_wait.count() > 0 ? RoomDeadline(ex, room_wait) : PreferWaitDeadline(ex);
  req.cancelled = [&ex] { return ex.ClientGone(); };
  return req;
}

void LaunchFrontImage(ApiContext& ctx, const Exchange& ex, const std::string& ref,
                      launch::LaunchRequest& req) {
  req.image = ref;
  if (auto found = FindFrontImage(ctx, ex, ref)) {
    req.image = found->id;
    if (found->operators) req.scope = std::nullopt;
  } else if (ctx.front_images && ctx.front_images->Defines(ref)) {
    req.image =
        ValueOrThrow(ctx.front_images->Ensure(ref, req.spec.owner, req.deadline, req.cancelled));
    req.scope = std::nullopt;  // the operator's
  }
}

launch::Payer PayerOf(const Exchange& ex) {
  const Caller& caller = CallerOf(ex);
  return {caller.key_id, caller.daily_limit_micros};
}

io::SandboxIo RunningIo(ApiContext& ctx, Exchange& ex, const control::Sandbox& s) {
  const Caller& caller = CallerOf(ex);
  return ValueOrThrow(ctx.io.Reach(s, {caller.key_id, caller.daily_limit_micros}));
}

int64_t QueryInt(Exchange& ex, const std::string& name, int64_t min, int64_t max, int64_t def) {
  auto v = ex.Query(name);
  if (!v) return def;
  try {
    size_t used;
    long long x = std::stoll(*v, &used);
    if (used == v->size() && x >= min && x <= max) return x;
  } catch (...) {
  }
  throw InvalidField("query." + name, "must be an integer from " + std::to_string(min) + " to " +
                                          std::to_string(max));
}

std::string QueryPath(Exchange& ex, const std::string& name) {
  auto p = ex.Query(name);
  if (!p || p->empty()) throw InvalidField("query." + name, "is required");
  if ((*p)[0] != '/') throw InvalidField("query." + name, "must be an absolute path");
  if (p->find('\0') != std::string::npos)
    throw InvalidField("query." + name, "must not contain a NUL byte");
  return *p;
}

bool ParsePortHost(const ApiContext& ctx, std::string host, int* port, std::string* id) {
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (size_t colon = host.rfind(':');
      colon != std::string::npos && host.find(']') == std::string::npos)
    host.resize(colon);
  std::string suffix = "." + ctx.ports.domain;
  if (host.size() <= suffix.size() || !host.ends_with(suffix)) return false;
  std::string label = host.substr(0, host.size() - suffix.size());
  size_t dash = label.find('-');
  if (dash == std::string::npos || dash == 0 || dash > 5 || label.find('.') != std::string::npos)
    return false;
  std::string p = label.substr(0, dash), rest = label.substr(dash + 1);
  if (!std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  if (rest.empty() || rest.size() > 64 || !std::all_of(rest.begin(), rest.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-';
      }))
    return false;
  *port = std::stoi(p);
  *id = rest;
  return *port >= 1 && *port <= 65535;
}

}  // namespace kiln::api
