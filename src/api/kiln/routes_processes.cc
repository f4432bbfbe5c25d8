// Background processes:
// /v1/sandboxes/{id}/processes[/{pid}[/output|:write|:signal|:resize]].
#include <algorithm>
#include <cstdint>
#include <string>

#include "api/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/requests.h"
#include "api/kiln/routes.h"
#include "common/contract.h"

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

// follow=true: NDJSON events until the process ends, by long polls.
void Follow(Exchange& ex, const io::SandboxIo& sandbox, const std::string& id, uint64_t cursor) {
  bool begun = false;
  for (;;) {
    io::OutputPage page = ValueOrThrow(sandbox.ProcessOutput(id, cursor, 20000, 40000));
    if (!begun) {
      if (!ex.BeginStream(200, "application/x-ndjson")) return;
      begun = true;
    }
    std::string out;
    if (page.dropped_bytes > 0) out += OutputDroppedEventJson(page).dump() + "\n";
    for (const auto& c : page.chunks) {
      out += OutputEventJson(c.stream, c.offset, c.data)
                 .dump(-1, ' ', false, json::error_handler_t::replace) +
             "\n";
    }
    cursor = page.next_cursor;
    if (page.complete) {
      out += ProcessExitEventJson(page.process).dump() + "\n";
      ex.WriteChunk(out);
      return ex.EndStream();
    }
    if (!out.empty() && !ex.WriteChunk(out)) return;
  }
}

// Answers ProcessInfo of the process a call returned (or its failure).
void SendProcess(Exchange& ex, Result<io::ProcessInfo> process) {
  ex.SendJson(200, ProcessJson(ValueOrThrow(std::move(process))));
}

}  // namespace

void AddProcessRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/v1/sandboxes/{id}/processes", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    io::ProcessSpec req = ReadProcessStart(ex.JsonBody(), *s);
    SendProcess(ex, RunningIo(ctx, ex, *s).ProcessStart(req));
  });

  r.Add("GET", "/v1/sandboxes/{id}/processes", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    json data = json::array();
    for (const auto& p : ValueOrThrow(RunningIo(ctx, ex, *s).ProcessList()))
      data.push_back(ProcessJson(p));
    ex.SendJson(200, ListJson(std::move(data)));
  });

  r.Add("GET", "/v1/sandboxes/{id}/processes/{pid}", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    SendProcess(ex, RunningIo(ctx, ex, *s).ProcessGet(ex.params["pid"]));
  });

  r.Add("GET", "/v1/sandboxes/{id}/processes/{pid}/output", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    io::SandboxIo sandbox = RunningIo(ctx, ex, *s);
    FollowQuery q = ReadFollowQuery(ex, contract::kOutputWaitMs, /*loose_follow=*/false);
    if (q.follow) {
      // Check the process exists before answering 200.
      ValueOrThrow(sandbox.ProcessGet(ex.params["pid"]));
      auto stream_slot = OpenStream(ctx, *s);
      return Follow(ex, sandbox, ex.params["pid"], q.cursor);
    }
    ex.SendJson(200,
                OutputPageJson(ValueOrThrow(sandbox.ProcessOutput(
                    ex.params["pid"], q.cursor, q.wait_ms, static_cast<int>(q.wait_ms) + 30000))));
  });

  r.Add("POST", "/v1/sandboxes/{id}/processes/{pid}:write", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    StdinWrite w = ReadStdinWrite(ex.JsonBody(16 << 20));
    io::SandboxIo sandbox = RunningIo(ctx, ex, *s);
    // Bytes before the offset already taken are not written twice.
    if (w.offset) {
      uint64_t taken = ValueOrThrow(sandbox.ProcessGet(ex.params["pid"])).stdin_offset;
      uint64_t start = static_cast<uint64_t>(*w.offset);
      if (start > taken)
        throw InvalidField("body.offset",
                           "is past the " + std::to_string(taken) + " stdin bytes taken so far");
      w.bytes.erase(0, std::min<uint64_t>(taken - start, w.bytes.size()));
    }
    uint64_t offset = ValueOrThrow(sandbox.ProcessWrite(ex.params["pid"], w.bytes, w.eof));
    ex.SendJson(200, json{{"offset", offset}});
  });

  r.Add("POST", "/v1/sandboxes/{id}/processes/{pid}:signal", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string sig = ReadSignal(ex.JsonBody());
    SendProcess(ex, RunningIo(ctx, ex, *s).ProcessSignal(ex.params["pid"], sig));
  });

  r.Add("POST", "/v1/sandboxes/{id}/processes/{pid}:resize", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    io::TerminalSize size = ReadResize(ex.JsonBody());
    SendProcess(ex, RunningIo(ctx, ex, *s).ProcessResize(ex.params["pid"], size));
  });
}

}  // namespace kiln::api::v1
