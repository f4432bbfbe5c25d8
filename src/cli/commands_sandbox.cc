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
const RequestOptions kQueryOptions{.timeout = 30s};
constexpr auto kBootTime = 180s;
constexpr auto kStartPoll = 250ms;
constexpr auto kStartWait = 180s;

std::string required_id(const json& info) {
  std::string id = string_field(info, "id");
  if (id.empty()) throw ClientError("bad_response", "the daemon's answer has no sandbox id");
  return id;
}

}  // namespace

std::chrono::milliseconds create_timeout(int wait_seconds) {
  return std::chrono::seconds(wait_seconds) + kBootTime;
}

json create_sandbox(Context& ctx, const json& body, int wait_seconds) {
  RequestOptions options{.timeout = create_timeout(wait_seconds)};
  options.headers.emplace_back("Prefer", "wait=" + std::to_string(wait_seconds));
  json info = post_once(ctx, "/v1/sandboxes", body, std::move(options));
  required_id(info);
  return info;
}

json wait_until_running(Context& ctx, json info, bool interruptible) {
  const std::string id = required_id(info);
  const auto deadline = std::chrono::steady_clock::now() + kStartWait;
  while (string_field(info, "state") == "starting") {
    if (std::chrono::steady_clock::now() > deadline) {
      throw ClientError("start_failed", "sandbox " + id + " is still starting after 180 s");
    }
    if (interruptible && interrupt_requested()) throw Interrupted(interrupt_signal());
    std::this_thread::sleep_for(kStartPoll);
    RequestOptions poll = kQueryOptions;
    poll.interruptible = interruptible;
    info = ctx.http().call(Method::kGet, sandbox_target(id), nullptr, poll);
  }
  if (std::string state = string_field(info, "state"); state != "running") {
    std::string reason = string_field(info, "stopReason");
    throw ClientError("start_failed", "sandbox " + id + " did not start (state " + state +
                                          (reason.empty() ? "" : ", " + reason) + ")");
  }
  return info;
}

void stop_sandbox_quietly(Context& ctx, const std::string& id) {
  try {
    const json empty = json::object();
    ctx.http().call(Method::kPost, sandbox_target(id, ":stop"), &empty, kLifecycleOptions);
  } catch (const std::exception& e) {
    warn("could not stop sandbox " + id + " (" + e.what() +
         "); it stops by itself when its lease ends");
  }
}

std::string sandbox_table(const json& sandboxes) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : sandboxes) {
    auto memory = int_field(s, "memoryMiB");
    rows.push_back({display_value(s.value("id", json())), display_value(s.value("state", json())),
                    display_value(s.value("vcpu", json())),
                    memory ? std::to_string(*memory) + "MiB" : "-",
                    display_value(s.value("createdAt", json()))});
  }
  return format_table({"ID", "STATE", "VCPU", "MEMORY", "CREATED"}, rows);
}

int cmd_sandbox_create(Context& ctx, const ParsedArgs& args) {
  const json body = sandbox_create_body(args);
  const int wait = wait_seconds(args);
  Progress progress("creating sandbox", ctx.progress());
  json info = create_sandbox(ctx, body, wait);
  info = wait_until_running(ctx, std::move(info), /*interruptible=*/false);
  progress.done();
  if (ctx.json()) {
    print_json(info);
    return 0;
  }
  print_out(required_id(info) + "\n");
  return 0;
}

int cmd_sandbox_ls(Context& ctx, const ParsedArgs& args) {
  json sandboxes = list_all(
      ctx, [&args](const std::optional<std::string>& cursor) { return list_target(args, cursor); },
      "sandbox");
  return print_answer(ctx, {{"data", sandboxes}, {"nextCursor", nullptr}},
                      sandbox_table(sandboxes));
}

int cmd_sandbox_get(Context& ctx, const ParsedArgs& args) {
  json info =
      ctx.http().call(Method::kGet, sandbox_target(args.positionals.at(0)), nullptr, kQueryOptions);
  if (ctx.json()) {
    print_json(info);
    return 0;
  }
  // The useful fields first, in a stable order; anything newer after them.
  static const std::vector<std::string> kOrder = {
      "id",     "name",     "state",     "vcpu",    "memoryMiB", "diskMiB", "timeoutSeconds",
      "labels", "envNames", "createdAt", "readyAt", "expiresAt", "endedAt", "stopReason"};
  print_out(format_fields(info, kOrder));
  return 0;
}

int cmd_sandbox_extend(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json body = extend_body(args);
  json info = ctx.http().call(Method::kPost, sandbox_target(id, ":extend"), &body, kQueryOptions);
  return print_answer(ctx, info,
                      format_key_values({{"id", string_field(info, "id", id)},
                                         {"expiresAt", string_field(info, "expiresAt", "-")}}));
}

int cmd_sandbox_stop(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json empty = json::object();
  json info =
      ctx.http().call(Method::kPost, sandbox_target(id, ":stop"), &empty, kLifecycleOptions);
  return print_answer(ctx, info, id + "\n");
}

int cmd_sandbox_rm(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  json answer = ctx.http().call(Method::kDelete, sandbox_target(id), nullptr, kLifecycleOptions);
  return print_answer(ctx, answer, id + "\n");
}

}  // namespace kiln::cli
