// kiln sandbox spawn | ps | logs | kill: background processes of a sandbox.
#include <unistd.h>

#include <csignal>

#include "cli/calls.h"
#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/exec_stream.h"
#include "cli/interrupt.h"
#include "cli/json_util.h"
#include "cli/ndjson.h"
#include "cli/output.h"
#include "cli/requests.h"
#include "cli/url.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::string ProcessTarget(const std::string& id, const std::string& pid,
                          std::string_view suffix = "") {
  return SandboxTarget(id, "/processes/" + PercentEncode(pid) + std::string(suffix));
}

std::string ProcessTable(const json& processes) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : processes) {
    std::string command = StringField(p, "command");
    if (command.empty() && p.contains("argv") && p["argv"].is_array()) {
      for (const auto& a : p["argv"])
        command += (command.empty() ? "" : " ") + a.get<std::string>();
    }
    rows.push_back({DisplayValue(p.value("id", json())), DisplayValue(p.value("state", json())),
                    DisplayValue(p.value("exitCode", json())),
                    DisplayValue(p.value("startedAt", json())), command});
  }
  return FormatTable({"ID", "STATE", "EXIT", "STARTED", "COMMAND"}, rows);
}

// Prints what the process wrote so far, page by page; returns 0.
int PrintOutputPages(Context& ctx, const std::string& target) {
  json all = json::array();
  long long cursor = 0;
  for (;;) {
    Query q;
    q.Add("cursor", std::to_string(cursor));
    json page = ctx.http().Call(Method::kGet, target + q.Str(), nullptr, kQueryOptions);
    const json chunks = page.value("chunks", json::array());
    for (const auto& c : chunks) {
      if (ctx.json()) {
        all.push_back(c);
        continue;
      }
      const bool err = StringField(c, "stream") == "stderr";
      if (!WriteAll(err ? STDERR_FILENO : STDOUT_FILENO, StringField(c, "data"))) return 0;
    }
    auto next = IntField(page, "nextCursor");
    if (chunks.empty() || !next || *next <= cursor) break;
    cursor = *next;
  }
  if (ctx.json()) PrintJson(json{{"chunks", all}});
  return 0;
}

}  // namespace

int CmdSandboxSpawn(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json body = SpawnBody(args, args.command);
  json info = PostOnce(ctx, SandboxTarget(id, "/processes"), body, RequestOptions{.timeout = 60s});
  return PrintAnswer(ctx, info, StringField(info, "id") + "\n");
}

int CmdSandboxPs(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  json answer =
      ctx.http().Call(Method::kGet, SandboxTarget(id, "/processes"), nullptr, kQueryOptions);
  return PrintAnswer(ctx, answer, ProcessTable(answer.value("data", json::array())));
}

int CmdSandboxLogs(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const std::string& pid = args.positionals.at(1);
  const std::string target = ProcessTarget(id, pid, "/output");
  if (!args.Has("follow")) return PrintOutputPages(ctx, target);
  // -f: NDJSON events until the process ends (or Ctrl-C, which leaves it running).
  InstallInterruptHandlers();
  ExecStreamPrinter printer(STDOUT_FILENO, STDERR_FILENO);
  LineSplitter lines;
  auto handle = [&](const std::string& line) {
    if (line.find_first_not_of(" \t") == std::string::npos) return;
    json event = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (event.is_discarded())
      throw ClientError("bad_response", "the daemon sent a line that is not JSON");
    if (ctx.json()) {
      PrintJson(event);
    } else {
      printer.OnEvent(event);
    }
  };
  try {
    ctx.http().Download(target + "?follow=true&cursor=0",
                        RequestOptions{.timeout = 24h, .interruptible = true},
                        [&](std::string_view bytes) {
                          for (const auto& line : lines.Feed(bytes)) handle(line);
                        });
    if (auto tail = lines.Finish()) handle(*tail);
  } catch (const Interrupted& e) {
    return e.signal == SIGPIPE ? 0 : 128 + e.signal;
  }
  return 0;
}

int CmdSandboxKill(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const std::string& pid = args.positionals.at(1);
  const json body = SignalBody(args);
  json info =
      ctx.http().Call(Method::kPost, ProcessTarget(id, pid, ":signal"), &body, kQueryOptions);
  return PrintAnswer(ctx, info, pid + "\n");
}

}  // namespace kiln::cli
