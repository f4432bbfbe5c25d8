// File watches: /v1/sandboxes/{id}/files/watches[/{wid}[/events]]. The
// watch lives in the sandbox's agent (src/agent/watches.h); these routes
// only check fields, relay, and turn a page of items into the reference's
// poll answer or its NDJSON follow.
#include <cstdint>
#include <set>
#include <string>

#include "api/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/routes.h"
#include "api/validate.h"
#include "common/contract.h"
#include "common/ids.h"
#include "common/time.h"

namespace kiln::api {

using nlohmann::json;

namespace {

// How long past its wait a read may take to answer (the agent answers at
// the wait's end; this is the channel's slack).
constexpr int64_t kWatchCallGraceMs = 5000;

bool SafeWatchId(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  }
  return true;
}

std::string NewWatchId() {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "w%016llx", static_cast<unsigned long long>(RandomU64()));
  return buf;
}

std::optional<std::vector<std::string>> ReadWatchGlobs(FieldReader& f, const std::string& name) {
  auto globs = f.StringList(name, contract::kWatchGlobs);
  for (const auto& g : globs.value_or(std::vector<std::string>{})) {
    if (g.empty() || g.size() > contract::kWatchGlobMax)
      f.Issue(name, "each pattern must be 1 to " + std::to_string(contract::kWatchGlobMax) +
                        " characters");
  }
  return globs;
}

io::WatchSpec ReadWatchSpec(FieldReader& f) {
  io::WatchSpec spec;
  auto path = f.String("path", 4096);
  if (!path)
    f.Issue("path", "is required");
  else if (path->empty() || (*path)[0] != '/')
    f.Issue("path", "must be an absolute path");
  spec.path = path.value_or("");
  // One spelling per directory, so event paths are root + "/" + name.
  while (spec.path.size() > 1 && spec.path.back() == '/') spec.path.pop_back();
  spec.recursive = f.Bool("recursive").value_or(false);
  static const std::set<std::string> kTypes = {"create", "write", "remove", "rename", "chmod"};
  spec.events = f.StringList("events", kTypes.size()).value_or(std::vector<std::string>{});
  for (const auto& e : spec.events) {
    if (!kTypes.count(e))
      f.Issue("events", "'" + e + "' is not one of create, write, remove, rename, chmod");
  }
  spec.include = ReadWatchGlobs(f, "include").value_or(std::vector<std::string>{});
  spec.exclude = ReadWatchGlobs(f, "exclude").value_or(std::vector<std::string>{});
  spec.batch_ms = f.Int("batchMs", contract::kWatchBatchMs);
  spec.timeout_ms = f.Int("timeoutMs", contract::kWatchTimeoutMs);
  spec.max_watches = static_cast<uint32_t>(f.Int("maxWatches", contract::kWatchMaxWatches));
  if (f.Bool("webhook").value_or(false))
    f.Issue("webhook", "kiln sends no webhooks: read the watch's events (GET …/events)");
  auto id = f.String("id", 64);
  if (id && !SafeWatchId(*id)) f.Issue("id", "must be 1 to 64 letters, digits, '-' or '_'");
  spec.id = id.value_or(NewWatchId());
  return spec;
}

// A page's events and notices in order, as the lines of a follow: runs of
// events as one `events` line, each notice on its own, each with the
// cursor past it. The ring's losses come first as an overflow (rate).
std::vector<json> WatchFollowLines(const io::WatchPage& page) {
  std::vector<json> lines;
  if (page.dropped > 0)
    lines.push_back(json{{"k", "overflow"}, {"dropped", page.dropped}, {"reason", "rate"}});
  json events = json::array();
  uint64_t after = 0;
  auto flush = [&] {
    if (events.empty()) return;
    lines.push_back(json{{"k", "events"}, {"events", std::move(events)}, {"cursor", after}});
    events = json::array();
  };
  for (const auto& item : page.items) {
    after = item.seq + 1;
    if (item.event) {
      events.push_back(WatchEventJson(*item.event));
    } else if (item.notice) {
      flush();
      json line = WatchNoticeJson(*item.notice);
      line["cursor"] = after;
      lines.push_back(std::move(line));
    }
  }
  flush();
  return lines;
}

json WatchPollAnswer(const io::WatchPage& page) {
  json events = json::array(), notices = json::array();
  if (page.dropped > 0)
    notices.push_back(json{{"k", "overflow"}, {"dropped", page.dropped}, {"reason", "rate"}});
  for (const auto& item : page.items) {
    if (item.event) events.push_back(WatchEventJson(*item.event));
    if (item.notice) notices.push_back(WatchNoticeJson(*item.notice));
  }
  return json{{"events", events}, {"notices", notices},  {"nextCursor", page.next_cursor},
              {"lostBytes", 0},   {"ended", page.ended}, {"watch", WatchJson(page.watch)}};
}

bool WriteWatchLine(Exchange& ex, const json& line) {
  return ex.WriteChunk(line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
}

// follow=true: NDJSON lines by long polls, for one slice of
// kWatchFollowSliceMs; then `continue` (the client reads again from the
// cursor). The first page was read before the 200.
void FollowWatch(Exchange& ex, const control::Sandbox& s, const io::SandboxIo& sandbox,
                 const std::string& id, io::WatchPage page) {
  if (!ex.BeginStream(200, "application/x-ndjson")) return;
  const int64_t end = MonotonicNowMs() + contract::kWatchFollowSliceMs;
  uint64_t cursor = page.next_cursor;
  for (;;) {
    for (const json& line : WatchFollowLines(page)) {
      if (!WriteWatchLine(ex, line)) return;
    }
    cursor = page.next_cursor;
    if (page.ended) return ex.EndStream();
    int64_t left = end - MonotonicNowMs();
    if (left <= 0 || ex.ClientGone()) break;
    // A pause closes the channel without failing the calls on it: the call's
    // own deadline (the wait + kWatchCallGraceMs) is how a follow learns of it.
    int64_t wait = std::min<int64_t>(left, contract::kWatchWaitMs.max);
    auto next = sandbox.WatchRead(id, cursor, wait, static_cast<int>(wait + kWatchCallGraceMs));
    if (!next.ok()) {
      control::SandboxState st = s.state();
      bool paused = st == control::SandboxState::kPaused || st == control::SandboxState::kPausing;
      json line;
      if (paused)
        line = json{{"k", "paused"}, {"cursor", cursor}};
      else if (next.status().code() == Code::kNotRunning || !s.channel())
        line = json{{"k", "end"}, {"reason", "gone"}, {"cursor", cursor}};
      else
        line = json{{"k", "failure"},
                    {"code", CodeName(next.status().code())},
                    {"status", HttpStatus(next.status().code())},
                    {"message", next.status().message()}};
      WriteWatchLine(ex, line);
      return ex.EndStream();
    }
    page = std::move(*next);
  }
  if (WriteWatchLine(ex, json{{"k", "continue"}, {"cursor", cursor}})) ex.EndStream();
}

}  // namespace

void AddWatchRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/v1/sandboxes/{id}/files/watches", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json body = ex.JsonBody();
    FieldReader f(body);
    io::WatchSpec spec = ReadWatchSpec(f);
    f.Finish();
    ex.SendJson(200, WatchJson(ValueOrThrow(RunningIo(ctx, ex, *s).WatchStart(spec))));
  });

  r.Add("GET", "/v1/sandboxes/{id}/files/watches", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json data = json::array();
    for (const auto& w : ValueOrThrow(RunningIo(ctx, ex, *s).WatchList()))
      data.push_back(WatchJson(w));
    ex.SendJson(200, json{{"data", data}});
  });

  r.Add("GET", "/v1/sandboxes/{id}/files/watches/{wid}/events", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    const std::string id = ex.params["wid"];
    uint64_t cursor = static_cast<uint64_t>(QueryInt(ex, "cursor", 0, INT64_MAX, 0));
    int64_t wait_ms = QueryInt(ex, "waitMs", contract::kWatchWaitMs.min, contract::kWatchWaitMs.max,
                               contract::kWatchWaitMs.def);
    std::string follow = ex.Query("follow").value_or("false");
    if (follow == "True" || follow == "1") follow = "true";
    if (follow != "true" && follow != "false")
      throw InvalidField("query.follow", "must be true or false");
    // Reading never wakes a paused sandbox: it says so, and the cursor holds.
    auto sandbox = ctx.io.ReachAwake(*s);
    if (!sandbox.ok() && sandbox.status().code() == Code::kSandboxPaused) {
      json paused{{"k", "paused"}, {"cursor", cursor}};
      if (follow == "true") {
        if (ex.BeginStream(200, "application/x-ndjson") && WriteWatchLine(ex, paused))
          ex.EndStream();
        return;
      }
      return ex.SendJson(200, json{{"events", json::array()},
                                   {"notices", json::array({paused})},
                                   {"nextCursor", cursor},
                                   {"lostBytes", 0},
                                   {"ended", false}});
    }
    io::SandboxIo io = ValueOrThrow(std::move(sandbox));
    if (follow == "true") {
      auto stream_slot = OpenStream(ctx, *s);
      // The first read answers at once, so an unknown watch is still a 404.
      io::WatchPage first = ValueOrThrow(io.WatchRead(id, cursor, 0, 30000));
      return FollowWatch(ex, *s, io, id, std::move(first));
    }
    ex.SendJson(200, WatchPollAnswer(ValueOrThrow(io.WatchRead(
                         id, cursor, wait_ms, static_cast<int>(wait_ms + kWatchCallGraceMs)))));
  });

  r.Add("DELETE", "/v1/sandboxes/{id}/files/watches/{wid}", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    bool stopped = ValueOrThrow(RunningIo(ctx, ex, *s).WatchStop(ex.params["wid"]));
    ex.SendJson(200, json{{"stopped", stopped}});
  });
}

}  // namespace kiln::api
