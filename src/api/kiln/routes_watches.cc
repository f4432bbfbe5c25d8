// File watches: /v1/sandboxes/{id}/files/watches[/{wid}[/events]]. The
// watch lives in the sandbox's agent (src/agent/watches.h); these routes
// relay, and follow a watch by long polls as NDJSON (its pages are rendered
// by presenters_io.cc).
#include <cstdint>
#include <string>

#include "api/errors.h"
#include "api/kiln/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/requests.h"
#include "api/kiln/routes.h"
#include "common/contract.h"
#include "common/time.h"

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

// How long past its wait a read may take to answer (the agent answers at
// the wait's end; this is the channel's slack).
constexpr int64_t kWatchCallGraceMs = 5000;

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
        line = WatchPausedJson(cursor);
      else if (next.status().code() == Code::kNotRunning || !s.channel())
        line = WatchGoneJson(cursor);
      else
        line = FailureJson(next.status());
      WriteWatchLine(ex, line);
      return ex.EndStream();
    }
    page = std::move(*next);
  }
  if (WriteWatchLine(ex, WatchContinueJson(cursor))) ex.EndStream();
}

}  // namespace

void AddWatchRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/v1/sandboxes/{id}/files/watches", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    io::WatchSpec spec = ReadWatch(ex.JsonBody());
    ex.SendJson(200, WatchJson(ValueOrThrow(RunningIo(ctx, ex, *s).WatchStart(spec))));
  });

  r.Add("GET", "/v1/sandboxes/{id}/files/watches", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json data = json::array();
    for (const auto& w : ValueOrThrow(RunningIo(ctx, ex, *s).WatchList()))
      data.push_back(WatchJson(w));
    ex.SendJson(200, ListJson(std::move(data)));
  });

  r.Add("GET", "/v1/sandboxes/{id}/files/watches/{wid}/events", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    const std::string id = ex.params["wid"];
    FollowQuery q = ReadFollowQuery(ex, contract::kWatchWaitMs, /*loose_follow=*/true);
    // Reading never wakes a paused sandbox: it says so, and the cursor holds.
    auto sandbox = ctx.io.ReachAwake(*s);
    if (!sandbox.ok() && sandbox.status().code() == Code::kSandboxPaused) {
      if (q.follow) {
        if (ex.BeginStream(200, "application/x-ndjson") &&
            WriteWatchLine(ex, WatchPausedJson(q.cursor)))
          ex.EndStream();
        return;
      }
      return ex.SendJson(200, WatchPausedPollJson(q.cursor));
    }
    io::SandboxIo io = ValueOrThrow(std::move(sandbox));
    if (q.follow) {
      auto stream_slot = OpenStream(ctx, *s);
      // The first read answers at once, so an unknown watch is still a 404.
      io::WatchPage first = ValueOrThrow(io.WatchRead(id, q.cursor, 0, 30000));
      return FollowWatch(ex, *s, io, id, std::move(first));
    }
    ex.SendJson(200,
                WatchPollJson(ValueOrThrow(io.WatchRead(
                    id, q.cursor, q.wait_ms, static_cast<int>(q.wait_ms + kWatchCallGraceMs)))));
  });

  r.Add("DELETE", "/v1/sandboxes/{id}/files/watches/{wid}", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    bool stopped = ValueOrThrow(RunningIo(ctx, ex, *s).WatchStop(ex.params["wid"]));
    ex.SendJson(200, json{{"stopped", stopped}});
  });
}

}  // namespace kiln::api::v1
