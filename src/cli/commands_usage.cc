// kiln usage: metered usage and cost from GET /v1/usage, as a table.
#include <chrono>

#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/json_util.h"
#include "cli/output.h"
#include "cli/requests.h"

namespace kiln::cli {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::vector<std::string> UsageRow(const std::string& group, const json& t) {
  if (!t.is_object()) return {group};
  return {group,
          DisplayValue(t.value("sandboxes", json())),
          FormatNumber(t.value("cpuSeconds", json()), 1),
          FormatNumber(t.value("gibHours", json()), 3),
          FormatNumber(t.value("gbMonths", json()), 6),
          DisplayValue(t.value("costMicros", json()))};
}

}  // namespace

int CmdUsage(Context& ctx, const ParsedArgs& args) {
  const std::string target = UsageTarget(args, std::chrono::system_clock::now());
  json answer = ctx.http().Call(Method::kGet, target, nullptr, RequestOptions{.timeout = 60s});
  if (!answer.is_object() || !answer.contains("data") || !answer["data"].is_array()) {
    throw ClientError("bad_response", "the daemon's usage answer has no \"data\" array");
  }
  if (ctx.json()) {
    PrintJson(answer);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& g : answer["data"]) {
    rows.push_back(UsageRow(DisplayValue(g.is_object() ? g.value("group", json()) : json()), g));
  }
  // Ungrouped, the one row already is the total.
  const bool grouped = answer.contains("groupBy") && !answer["groupBy"].is_null();
  if (grouped && answer.contains("total")) {
    json total = answer["total"];
    if (total.is_object() && !total.contains("sandboxes")) {
      long long sandboxes = 0;
      for (const auto& g : answer["data"]) sandboxes += IntField(g, "sandboxes").value_or(0);
      total["sandboxes"] = sandboxes;
    }
    rows.push_back(UsageRow("TOTAL", total));
  }
  PrintOut(FormatTable(
      {"GROUP", "SANDBOXES", "CPU_SECONDS", "GIB_HOURS", "GB_MONTHS", "COST_MICROS"}, rows));
  return 0;
}

}  // namespace kiln::cli
