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
std::string policy_text(const json& policy) {
  std::vector<std::pair<std::string, std::string>> lines;
  auto internet = policy.is_object() ? policy.find("internet") : policy.end();
  lines.emplace_back("internet", internet == policy.end() || !internet->is_boolean() ? "-"
                                 : internet->get<bool>()                             ? "on"
                                                                                     : "off");
  for (const char* key : {"allow", "deny", "version", "updatedAt"}) {
    lines.emplace_back(key, display_value(policy.is_object() ? policy.value(key, json()) : json()));
  }
  // The daemon applies a change to the running proxy right away; say so if
  // it has not (yet), since the rules shown are then not those in force.
  auto enforced = int_field(policy, "enforcedVersion");
  auto version = int_field(policy, "version");
  if (enforced && version && *enforced != *version) {
    lines.emplace_back("enforcedVersion", std::to_string(*enforced));
  }
  return format_key_values(lines);
}

std::string log_table(const json& entries) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : entries) {
    if (!e.is_object()) continue;
    rows.push_back(
        {display_value(e.value("time", json())), display_value(e.value("method", json())),
         display_value(e.value("host", json())), display_value(e.value("address", json())),
         display_value(e.value("port", json())), display_value(e.value("verdict", json())),
         format_bytes(e.value("bytesOut", json())), format_bytes(e.value("bytesIn", json())),
         display_value(e.value("durationMs", json()))});
  }
  return format_table({"TIME", "METHOD", "HOST", "ADDRESS", "PORT", "VERDICT", "OUT", "IN", "MS"},
                      rows);
}

}  // namespace

int cmd_sandbox_network(Context& ctx, const ParsedArgs& args) {
  const std::string& id = args.positionals.at(0);
  // Checks every flag combination before any request.
  std::optional<json> body;
  try {
    body = network_put_body(args);
  } catch (const UsageError& e) {
    throw UsageError(e.what(), "see `kiln sandbox network --help`");
  }
  if (args.has("log")) {
    json entries = list_all(
        ctx,
        [&](const std::optional<std::string>& cursor) {
          return network_log_target(id, args, cursor);
        },
        "network log");
    return print_answer(ctx, {{"data", entries}, {"nextCursor", nullptr}}, log_table(entries));
  }
  const std::string target = sandbox_target(id, "/network");
  json policy = body ? ctx.http().call(Method::kPut, target, &*body, kPolicyOptions)
                     : ctx.http().call(Method::kGet, target, nullptr, kPolicyOptions);
  return print_answer(ctx, policy, policy_text(policy));
}

}  // namespace kiln::cli
