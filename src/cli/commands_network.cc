// kiln sandbox network: show or replace a sandbox's egress policy, or list
// its egress log.
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/calls.h"
#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/json_util.h"
#include "cli/output.h"
#include "cli/requests.h"
#include "cli/url.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

const RequestOptions kPolicyOptions{.timeout = 30s};

// The policy as key: value lines; rules the daemon added later still show.
std::string PolicyText(const json& policy) {
  std::vector<std::pair<std::string, std::string>> lines;
  auto internet = policy.is_object() ? policy.find("internet") : policy.end();
  lines.emplace_back("internet", internet == policy.end() || !internet->is_boolean() ? "-"
                                 : internet->get<bool>()                             ? "on"
                                                                                     : "off");
  for (const char* key : {"allow", "deny", "version", "updatedAt"}) {
    lines.emplace_back(key, DisplayValue(policy.is_object() ? policy.value(key, json()) : json()));
  }
  // The daemon applies a change to the running proxy right away; say so if
  // it has not (yet), since the rules shown are then not those in force.
  auto enforced = IntField(policy, "enforcedVersion");
  auto version = IntField(policy, "version");
  if (enforced && version && *enforced != *version) {
    lines.emplace_back("enforcedVersion", std::to_string(*enforced));
  }
  return FormatKeyValues(lines);
}

std::string LogTable(const json& entries) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : entries) {
    if (!e.is_object()) continue;
    rows.push_back({DisplayValue(e.value("time", json())), DisplayValue(e.value("method", json())),
                    DisplayValue(e.value("host", json())), DisplayValue(e.value("address", json())),
                    DisplayValue(e.value("port", json())), DisplayValue(e.value("verdict", json())),
                    FormatBytes(e.value("bytesOut", json())),
                    FormatBytes(e.value("bytesIn", json())),
                    DisplayValue(e.value("durationMs", json()))});
  }
  return FormatTable({"TIME", "METHOD", "HOST", "ADDRESS", "PORT", "VERDICT", "OUT", "IN", "MS"},
                     rows);
}

}  // namespace

int CmdSandboxNetwork(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  // Checks every flag combination before any request.
  std::optional<json> body;
  try {
    body = NetworkPutBody(args);
  } catch (const UsageError& e) {
    throw UsageError(e.what(), "see `kiln sandbox network --help`");
  }
  if (args.Has("log")) {
    json entries = ListAll(
        ctx,
        [&](const std::optional<std::string>& cursor) {
          return NetworkLogTarget(id, args, cursor);
        },
        "network log");
    return PrintAnswer(ctx, {{"data", entries}, {"nextCursor", nullptr}}, LogTable(entries));
  }
  const std::string target = SandboxTarget(id, "/network");
  json policy = body ? ctx.http().Call(Method::kPut, target, &*body, kPolicyOptions)
                     : ctx.http().Call(Method::kGet, target, nullptr, kPolicyOptions);
  return PrintAnswer(ctx, policy, PolicyText(policy));
}

}  // namespace kiln::cli
