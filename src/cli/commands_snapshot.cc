// kiln sandbox snapshot | fork, kiln snapshot ls | get | rm
#include <chrono>

#include "cli/calls.h"
#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/json_util.h"
#include "cli/output.h"
#include "cli/progress.h"
#include "cli/requests.h"
#include "cli/url.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// Capturing copies the sandbox's memory and files to disk.
constexpr auto kCaptureTime = 300s;
const RequestOptions kQueryOptions{.timeout = 30s};

// The sandboxes a partly failed fork did start ({"error": {"details": {"started": [...]}}}).
std::vector<std::string> started_ids(const json& error_body) {
  std::vector<std::string> ids;
  const json started = error_body.is_object()
                           ? error_body.value(json::json_pointer("/error/details/started"), json())
                           : json();
  if (!started.is_array()) return ids;
  for (const auto& s : started) {
    if (std::string id = string_field(s, "id"); !id.empty()) ids.push_back(std::move(id));
  }
  return ids;
}

}  // namespace

int cmd_sandbox_snapshot(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json body = snapshot_body(args);
  Progress progress("snapshotting sandbox " + id, ctx.progress());
  json snapshot = post_once(ctx, sandbox_target(id, ":snapshot"), body,
                            RequestOptions{.timeout = kCaptureTime});
  progress.done();
  const std::string snapshot_id = string_field(snapshot, "id");
  if (snapshot_id.empty())
    throw ClientError("bad_response", "the daemon's answer has no snapshot id");
  return print_answer(ctx, snapshot, snapshot_id + "\n");
}

int cmd_sandbox_fork(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json body = fork_body(args);
  const int wait = wait_seconds(args);
  RequestOptions options{.timeout = create_timeout(wait) + kCaptureTime};
  options.headers.emplace_back("Prefer", "wait=" + std::to_string(wait));
  Progress progress("forking sandbox " + id, ctx.progress());
  json answer;
  try {
    answer = post_once(ctx, sandbox_target(id, ":fork"), body, std::move(options));
  } catch (const ApiError& e) {
    progress.done();
    // The copies that did start run on (and cost): say which they are.
    const auto ids = started_ids(e.body);
    if (!ctx.json() && !ids.empty()) {
      std::string list;
      for (const auto& s : ids) list += (list.empty() ? "" : " ") + s;
      warn("these copies did start and keep running: " + list);
    }
    throw;
  }
  progress.done();
  if (!answer.is_object() || !answer.contains("sandboxes") || !answer["sandboxes"].is_array()) {
    throw ClientError("bad_response", "the daemon's fork answer has no \"sandboxes\" list");
  }
  return print_answer(ctx, answer, sandbox_table(answer["sandboxes"]));
}

int cmd_snapshot_ls(Context& ctx, const ParsedArgs& args) {
  json snapshots = list_all(
      ctx,
      [&args](const std::optional<std::string>& cursor) {
        return snapshot_list_target(args, cursor);
      },
      "snapshot");
  if (ctx.json()) {
    print_json({{"data", std::move(snapshots)}, {"nextCursor", nullptr}});
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : snapshots) {
    if (!s.is_object()) continue;
    rows.push_back({display_value(s.value("id", json())), display_value(s.value("name", json())),
                    display_value(s.value("sourceSandboxId", json())),
                    format_bytes(s.value("sizeBytes", json())),
                    display_value(s.value("createdAt", json())),
                    display_value(s.value("expiresAt", json()))});
  }
  print_out(format_table({"ID", "NAME", "SANDBOX", "SIZE", "CREATED", "EXPIRES"}, rows));
  return 0;
}

int cmd_snapshot_get(Context& ctx, const ParsedArgs& args) {
  json info = ctx.http().call(Method::kGet, snapshot_target(args.positionals.at(0)), nullptr,
                              kQueryOptions);
  if (ctx.json()) {
    print_json(info);
    return 0;
  }
  static const std::vector<std::string> kOrder = {
      "id",        "name",          "state",     "sourceSandboxId", "shape",     "labels",
      "sizeBytes", "retentionDays", "captureMs", "createdAt",       "expiresAt", "pool"};
  print_out(format_fields(info, kOrder));
  return 0;
}

int cmd_snapshot_rm(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json empty = json::object();
  json answer = ctx.http().call(Method::kPost, snapshot_target(id, ":delete"), &empty,
                                RequestOptions{.timeout = 120s});
  return print_answer(ctx, answer, id + "\n");
}

}  // namespace kiln::cli
