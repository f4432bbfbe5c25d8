// kiln sandbox create | ls | get | stop | rm
#include <algorithm>
#include <chrono>
#include <thread>

#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/interrupt.h"
#include "cli/json_util.h"
#include "cli/output.h"
#include "cli/requests.h"
#include "cli/url.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// Create boots a VM and stop tears one down; both answer once done.
constexpr RequestOptions kCreateOptions{.timeout = 180s, .idempotent = false};
constexpr RequestOptions kLifecycleOptions{.timeout = 120s};
constexpr RequestOptions kQueryOptions{.timeout = 30s};
constexpr auto kStartPoll = 250ms;
constexpr auto kStartWait = 180s;
constexpr int kMaxPages = 10000;  // guards against a cursor that never ends

std::string required_id(const json& info) {
  std::string id = string_field(info, "id");
  if (id.empty()) throw ClientError("bad_response", "the daemon's answer has no sandbox id");
  return id;
}

}  // namespace

json create_sandbox(Context& ctx, const json& body) {
  json info = ctx.http().call(Method::kPost, "/v1/sandboxes", &body, kCreateOptions);
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

int cmd_sandbox_create(Context& ctx, const ParsedArgs& args) {
  json info = create_sandbox(ctx, sandbox_create_body(args));
  info = wait_until_running(ctx, std::move(info), /*interruptible=*/false);
  if (ctx.json()) {
    print_json(info);
  } else {
    print_out(required_id(info) + "\n");
  }
  return 0;
}

int cmd_sandbox_ls(Context& ctx, const ParsedArgs& args) {
  json sandboxes = json::array();
  std::optional<std::string> cursor;
  for (int page = 0; page < kMaxPages; ++page) {
    json answer = ctx.http().call(Method::kGet, list_target(args, cursor), nullptr, kQueryOptions);
    if (!answer.is_object() || !answer.contains("data") || !answer["data"].is_array()) {
      throw ClientError("bad_response", "the daemon's sandbox list has no \"data\" array");
    }
    for (auto& s : answer["data"]) sandboxes.push_back(std::move(s));
    std::string next = string_field(answer, "nextCursor");
    if (next.empty() || next == cursor) break;
    cursor = std::move(next);
  }
  if (ctx.json()) {
    print_json({{"data", std::move(sandboxes)}, {"nextCursor", nullptr}});
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : sandboxes) {
    auto memory = int_field(s, "memoryMiB");
    rows.push_back({display_value(s.value("id", json())), display_value(s.value("state", json())),
                    display_value(s.value("vcpu", json())),
                    memory ? std::to_string(*memory) + "MiB" : "-",
                    display_value(s.value("createdAt", json()))});
  }
  print_out(format_table({"ID", "STATE", "VCPU", "MEMORY", "CREATED"}, rows));
  return 0;
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
  std::vector<std::pair<std::string, std::string>> lines;
  for (const auto& key : kOrder) {
    if (info.contains(key)) lines.emplace_back(key, display_value(info[key]));
  }
  if (info.is_object()) {
    for (const auto& [key, value] : info.items()) {
      if (key == "kind" || std::find(kOrder.begin(), kOrder.end(), key) != kOrder.end()) continue;
      lines.emplace_back(key, display_value(value));
    }
  }
  print_out(format_key_values(lines));
  return 0;
}

int cmd_sandbox_stop(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json empty = json::object();
  json info =
      ctx.http().call(Method::kPost, sandbox_target(id, ":stop"), &empty, kLifecycleOptions);
  if (ctx.json()) {
    print_json(info);
  } else {
    print_out(id + "\n");
  }
  return 0;
}

int cmd_sandbox_rm(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  json answer = ctx.http().call(Method::kDelete, sandbox_target(id), nullptr, kLifecycleOptions);
  if (ctx.json()) {
    print_json(answer);
  } else {
    print_out(id + "\n");
  }
  return 0;
}

}  // namespace kiln::cli
