// kiln sandbox snapshot | fork, kiln snapshot ls | get | rm | export | import
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

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

// The sandboxes a partly failed fork did start ({"error": {"details": {"started": [...]}}}).
std::vector<std::string> StartedIds(const json& error_body) {
  std::vector<std::string> ids;
  const json started = error_body.is_object()
                           ? error_body.value(json::json_pointer("/error/details/started"), json())
                           : json();
  if (!started.is_array()) return ids;
  for (const auto& s : started) {
    if (std::string id = StringField(s, "id"); !id.empty()) ids.push_back(std::move(id));
  }
  return ids;
}

}  // namespace

int CmdSandboxSnapshot(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json body = SnapshotBody(args);
  Progress progress("snapshotting sandbox " + id, ctx.progress());
  json snapshot =
      PostOnce(ctx, SandboxTarget(id, ":snapshot"), body, RequestOptions{.timeout = kCaptureTime});
  progress.Done();
  const std::string snapshot_id = StringField(snapshot, "id");
  if (snapshot_id.empty())
    throw ClientError("bad_response", "the daemon's answer has no snapshot id");
  return PrintAnswer(ctx, snapshot, snapshot_id + "\n");
}

int CmdSandboxFork(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json body = ForkBody(args);
  const int wait = WaitSeconds(args);
  RequestOptions options{.timeout = CreateTimeout(wait) + kCaptureTime};
  options.headers.emplace_back("Prefer", "wait=" + std::to_string(wait));
  Progress progress("forking sandbox " + id, ctx.progress());
  json answer;
  try {
    answer = PostOnce(ctx, SandboxTarget(id, ":fork"), body, std::move(options));
  } catch (const ApiError& e) {
    progress.Done();
    // The copies that did start run on (and cost): say which they are.
    const auto ids = StartedIds(e.body);
    if (!ctx.json() && !ids.empty()) {
      std::string list;
      for (const auto& s : ids) list += (list.empty() ? "" : " ") + s;
      Warn("these copies did start and keep running: " + list);
    }
    throw;
  }
  progress.Done();
  if (!answer.is_object() || !answer.contains("sandboxes") || !answer["sandboxes"].is_array()) {
    throw ClientError("bad_response", "the daemon's fork answer has no \"sandboxes\" list");
  }
  return PrintAnswer(ctx, answer, SandboxTable(answer["sandboxes"]));
}

int CmdSnapshotLs(Context& ctx, const ParsedArgs& args) {
  json snapshots = ListAll(
      ctx,
      [&args](const std::optional<std::string>& cursor) {
        return SnapshotListTarget(args, cursor);
      },
      "snapshot");
  if (ctx.json()) {
    PrintJson({{"data", std::move(snapshots)}, {"nextCursor", nullptr}});
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : snapshots) {
    if (!s.is_object()) continue;
    rows.push_back({DisplayValue(s.value("id", json())), DisplayValue(s.value("name", json())),
                    DisplayValue(s.value("sourceSandboxId", json())),
                    FormatBytes(s.value("sizeBytes", json())),
                    DisplayValue(s.value("createdAt", json())),
                    DisplayValue(s.value("expiresAt", json()))});
  }
  PrintOut(FormatTable({"ID", "NAME", "SANDBOX", "SIZE", "CREATED", "EXPIRES"}, rows));
  return 0;
}

int CmdSnapshotGet(Context& ctx, const ParsedArgs& args) {
  json info =
      ctx.http().Call(Method::kGet, SnapshotTarget(args.positionals.at(0)), nullptr, kQueryOptions);
  if (ctx.json()) {
    PrintJson(info);
    return 0;
  }
  static const std::vector<std::string> kOrder = {
      "id",        "name",          "state",     "sourceSandboxId", "shape",     "labels",
      "sizeBytes", "retentionDays", "captureMs", "createdAt",       "expiresAt", "pool"};
  PrintOut(FormatFields(info, kOrder));
  return 0;
}

int CmdSnapshotRm(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const json empty = json::object();
  json answer = ctx.http().Call(Method::kPost, SnapshotTarget(id, ":delete"), &empty,
                                RequestOptions{.timeout = 120s});
  return PrintAnswer(ctx, answer, id + "\n");
}

int CmdSnapshotExport(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  const std::string out = *args.Get("output");
  Progress progress("exporting snapshot " + id, ctx.progress());
  std::uint64_t bytes = DownloadToFile(ctx, SnapshotTarget(id, "/archive"), out);
  progress.Done();
  return PrintAnswer(ctx, json{{"id", id}, {"path", out}, {"bytes", bytes}}, out + "\n");
}

int CmdSnapshotImport(Context& ctx, const ParsedArgs& args) {
  const std::string& path = args.positionals.at(0);
  RequestOptions options = kTransferOptions;
  options.headers.emplace_back("Content-Type", "application/x-tar");
  Progress progress("importing " + path, ctx.progress());
  json snapshot = ctx.http().UploadFile(Method::kPost, "/v1/snapshots:import", path, options);
  progress.Done();
  const std::string snapshot_id = StringField(snapshot, "id");
  if (snapshot_id.empty())
    throw ClientError("bad_response", "the daemon's answer has no snapshot id");
  return PrintAnswer(ctx, snapshot, snapshot_id + "\n");
}

}  // namespace kiln::cli
