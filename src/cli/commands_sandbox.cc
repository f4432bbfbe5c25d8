// kiln sandbox create | ls | get | extend | stop | rm
#include <chrono>
#include <thread>

#include "cli/calls.h"
#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/interrupt.h"
#include "cli/json_util.h"
#include "cli/output.h"
#include "cli/progress.h"
#include "cli/requests.h"
#include "cli/url.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// Stop tears a VM down and answers once done.
const RequestOptions kLifecycleOptions{.timeout = 120s};
constexpr auto kBootTime = 180s;
constexpr auto kStartPoll = 250ms;
constexpr auto kStartWait = 180s;

std::string RequiredId(const json& info) {
  std::string id = StringField(info, "id");
  if (id.empty()) throw ClientError("bad_response", "the daemon's answer has no sandbox id");
  return id;
}

}  // namespace

std::chrono::milliseconds CreateTimeout(int wait_seconds) {
  return std::chrono::seconds(wait_seconds) + kBootTime;
}

json CreateSandbox(Context& ctx, const json& body, int wait_seconds) {
  RequestOptions options{.timeout = CreateTimeout(wait_seconds)};
  options.headers.emplace_back("Prefer", "wait=" + std::to_string(wait_seconds));
  json info = PostOnce(ctx, "/v1/sandboxes", body, std::move(options));
  RequiredId(info);
  return info;
}

json WaitUntilRunning(Context& ctx, json info, bool interruptible) {
  const std::string id = RequiredId(info);
  const auto deadline = std::chrono::steady_clock::now() + kStartWait;
  while (StringField(info, "state") == "starting") {
    if (std::chrono::steady_clock::now() > deadline) {
      throw ClientError("start_failed", "sandbox " + id + " is still starting after 180 s");
    }
    if (interruptible && InterruptRequested()) throw Interrupted(InterruptSignal());
    std::this_thread::sleep_for(kStartPoll);
    RequestOptions poll = kQueryOptions;
    poll.interruptible = interruptible;
    info = ctx.http().Call(Method::kGet, SandboxTarget(id), nullptr, poll);
  }
  if (std::string state = StringField(info, "state"); state != "running") {
    std::string reason = StringField(info, "stopReason");
    throw ClientError("start_failed", "sandbox " + id + " did not start (state " + state +
                                          (reason.empty() ? "" : ", " + reason) + ")");
  }
  return info;
}

void StopSandboxQuietly(Context& ctx, const std::string& id) {
  try {
    const json empty = json::object();
    ctx.http().Call(Method::kPost, SandboxTarget(id, ":stop"), &empty, kLifecycleOptions);
  } catch (const std::exception& e) {
    Warn("could not stop sandbox " + id + " (" + e.what() +
         "); it stops by itself when its lease ends");
  }
}

std::string SandboxTable(const json& sandboxes) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : sandboxes) {
    auto memory = IntField(s, "memoryMiB");
    rows.push_back({DisplayValue(s.value("id", json())), DisplayValue(s.value("state", json())),
                    DisplayValue(s.value("vcpu", json())),
                    memory ? std::to_string(*memory) + "MiB" : "-",
                    DisplayValue(s.value("createdAt", json()))});
  }
  return FormatTable({"ID", "STATE", "VCPU", "MEMORY", "CREATED"}, rows);
}

int CmdSandboxCreate(Context& ctx, const ParsedArgs& args) {
  const json body = SandboxCreateBody(args);
  const int wait = WaitSeconds(args);
  Progress progress("creating sandbox", ctx.progress());
  json info = CreateSandbox(ctx, body, wait);
  info = WaitUntilRunning(ctx, std::move(info), /*interruptible=*/false);
  progress.Done();
  if (ctx.json()) {
    PrintJson(info);
    return 0;
  }
  PrintOut(RequiredId(info) + "\n");
  return 0;
}

int CmdSandboxLs(Context& ctx, const ParsedArgs& args) {
  json sandboxes = ListAll(
      ctx, [&args](const std::optional<std::string>& cursor) { return ListTarget(args, cursor); },
      "sandbox");
  return PrintAnswer(ctx, {{"data", sandboxes}, {"nextCursor", nullptr}}, SandboxTable(sandboxes));
}

int CmdSandboxGet(Context& ctx, const ParsedArgs& args) {
  json info =
      ctx.http().Call(Method::kGet, SandboxTarget(args.positionals.at(0)), nullptr, kQueryOptions);
  if (ctx.json()) {
    PrintJson(info);
    return 0;
  }
  // The useful fields first, in a stable order; anything newer after them.
  static const std::vector<std::string> kOrder = {"id",
                                                  "name",
                                                  "state",
                                                  "vcpu",
                                                  "memoryMiB",
                                                  "diskMiB",
                                                  "timeoutSeconds",
                                                  "labels",
                                                  "envNames",
                                                  "createdAt",
                                                  "readyAt",
                                                  "expiresAt",
                                                  "endedAt",
                                                  "stopReason",
                                                  "onLeaseEnd",
                                                  "autoWake",
                                                  "idlePauseSeconds",
                                                  "pausable",
                                                  "persistent",
                                                  "pausedAt"};
  PrintOut(FormatFields(info, kOrder));
  return 0;
}

int CmdSandboxExtend(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json body = ExtendBody(args);
  json info = ctx.http().Call(Method::kPost, SandboxTarget(id, ":extend"), &body, kQueryOptions);
  return PrintAnswer(ctx, info,
                     FormatKeyValues({{"id", StringField(info, "id", id)},
                                      {"expiresAt", StringField(info, "expiresAt", "-")}}));
}

int CmdSandboxStop(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json empty = json::object();
  json info = ctx.http().Call(Method::kPost, SandboxTarget(id, ":stop"), &empty, kLifecycleOptions);
  return PrintAnswer(ctx, info, id + "\n");
}

int CmdSandboxRm(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  json answer = ctx.http().Call(Method::kDelete, SandboxTarget(id), nullptr, kLifecycleOptions);
  return PrintAnswer(ctx, answer, id + "\n");
}

int CmdSandboxPause(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json body = PauseBody(args);
  RequestOptions options = kLifecycleOptions;
  options.headers.emplace_back("Idempotency-Key", NewIdempotencyKey());
  json info = ctx.http().Call(Method::kPost, SandboxTarget(id, ":pause"), &body, options);
  return PrintAnswer(ctx, info, id + "\n");
}

int CmdSandboxMetrics(Context& ctx, const ParsedArgs& args) {
  json answer = ctx.http().Call(Method::kGet, MetricsTarget(args.positionals.at(0), args), nullptr,
                                kQueryOptions);
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : answer.value("points", json::array())) {
    rows.push_back({DisplayValue(p.value("at", json())),
                    FormatNumber(p.value("cpuPercent", json()), 1),
                    FormatNumber(p.value("cpuPeakPercent", json()), 1),
                    FormatBytes(p.value("memoryBytes", json())),
                    FormatBytes(p.value("memoryPeakBytes", json())),
                    FormatBytes(p.value("diskBytes", json()))});
  }
  return PrintAnswer(ctx, answer,
                     rows.empty()
                         ? std::string("no readings yet (one every 5 s while it runs)\n")
                         : FormatTable({"AT", "CPU%", "PEAK%", "MEMORY", "PEAK", "DISK"}, rows));
}

int CmdSandboxWake(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json body = WakeBody(args);
  RequestOptions options = kLifecycleOptions;
  options.headers.emplace_back("Idempotency-Key", NewIdempotencyKey());
  json info;
  try {
    info = ctx.http().Call(Method::kPost, SandboxTarget(id, ":wake"), &body, options);
  } catch (const ApiError& e) {
    // Already awake is what was asked for, unless a new lease was.
    if (e.code != "not_paused" || body.contains("timeoutSeconds")) throw;
    info = ctx.http().Call(Method::kGet, SandboxTarget(id), nullptr, kQueryOptions);
  }
  return PrintAnswer(ctx, info, id + "\n");
}

}  // namespace kiln::cli
