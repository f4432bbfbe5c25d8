// kiln sandbox watch ID PATH: starts a watch (POST …/files/watches), prints
// one line per event from its followed events (reconnecting from the cursor
// on `continue`) until Ctrl-C or its end, then stops it.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <string>

#include "cli/calls.h"
#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/interrupt.h"
#include "cli/json_util.h"
#include "cli/ndjson.h"
#include "cli/output.h"
#include "cli/url.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// "create /workspace/a.txt", "rename /workspace/b <- /workspace/a", "write /x (3)".
std::string EventLine(const json& e) {
  std::string line = StringField(e, "type") + " " + StringField(e, "path");
  if (BoolField(e, "isDir")) line += "/";
  if (e.contains("oldPath") && e["oldPath"].is_string())
    line += " <- " + e["oldPath"].get<std::string>();
  if (auto count = IntField(e, "count"); count && *count > 1)
    line += " (" + std::to_string(*count) + ")";
  return line + "\n";
}

}  // namespace

int CmdSandboxWatch(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json body = {{"path", args.positionals.at(1)}, {"recursive", args.Has("recursive")}};
  json info = PostOnce(ctx, SandboxTarget(id, "/files/watches"), body, kQueryOptions);
  const std::string wid = StringField(info, "id");
  const std::string base = SandboxTarget(id, "/files/watches/" + PercentEncode(wid));
  long long cursor = IntField(info, "cursor").value_or(0);
  if (!ctx.json())
    std::fprintf(stderr, "kiln: watching %s (watch %s)\n", body["path"].get<std::string>().c_str(),
                 wid.c_str());
  InstallInterruptHandlers();
  std::string end_reason;
  int status = 0;
  try {
    bool again = true;
    while (again && end_reason.empty()) {
      again = false;
      LineSplitter lines;
      auto handle = [&](const std::string& line) {
        if (line.find_first_not_of(" \t") == std::string::npos) return;
        json ev = json::parse(line, nullptr, false);
        if (ev.is_discarded())
          throw ClientError("bad_response", "the daemon sent a line that is not JSON");
        if (auto c = IntField(ev, "cursor")) cursor = *c;
        if (ctx.json()) PrintJson(ev);
        const std::string k = StringField(ev, "k");
        if (k == "events") {
          if (ctx.json()) return;
          std::string out;
          for (const auto& e : ev.value("events", json::array())) out += EventLine(e);
          if (!WriteAll(STDOUT_FILENO, out)) throw Interrupted(SIGPIPE);
        } else if (k == "continue") {
          again = true;
        } else if (k == "end") {
          end_reason = StringField(ev, "reason");
        } else if (k == "failure") {
          throw ClientError(StringField(ev, "code"), StringField(ev, "message"));
        } else if (!ctx.json()) {
          std::fprintf(stderr, "kiln: %s\n", ev.dump().c_str());
        }
      };
      ctx.http().Download(base + "/events?follow=true&cursor=" + std::to_string(cursor),
                          RequestOptions{.timeout = 150s, .interruptible = true},
                          [&](std::string_view bytes) {
                            for (const auto& line : lines.Feed(bytes)) handle(line);
                          });
      if (auto tail = lines.Finish()) handle(*tail);
    }
  } catch (const Interrupted& e) {
    // Ctrl-C is how it is meant to end; a closed stdout too.
    status = e.signal == SIGPIPE || e.signal == SIGINT ? 0 : 128 + e.signal;
    ClearInterrupt();
  }
  if (end_reason.empty()) {
    try {
      ctx.http().Call(Method::kDelete, base, nullptr, kQueryOptions);
    } catch (const std::exception&) {
      // The watch ends by its own timeout anyway.
    }
  } else if (!ctx.json()) {
    std::fprintf(stderr, "kiln: the watch ended: %s\n", end_reason.c_str());
  }
  return status;
}

}  // namespace kiln::cli
