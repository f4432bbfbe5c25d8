// GET /v1/usage: metered totals from the usage ledger.
#include "api/auth.h"
#include "api/errors.h"
#include "api/kiln/routes.h"
#include "common/time.h"

namespace kiln::api {

using nlohmann::json;

namespace {

int64_t QueryTime(Exchange& ex, const std::string& name, int64_t def) {
  auto v = ex.Query(name);
  if (!v) return def;
  auto t = ParseTime(*v);
  if (!t) throw InvalidField("query." + name, "must be an RFC 3339 time like 2026-11-29T10:00:00Z");
  return *t;
}

}  // namespace

void AddUsageRoutes(Router& r, ApiContext& ctx) {
  // The reference's limits: a key's daily spending limit over the last 24
  // hours (null when it has none). A local daemon has no trial.
  r.Add("GET", "/v1/limits", [&ctx](Exchange& ex) {
    const Caller& caller = CallerOf(ex);
    ctx.sandboxes.MeterAll(/*flush_all=*/true);
    double used = ctx.sandboxes.SpentMicrosSince(caller.key_id, StableNowMs() - 86400000);
    auto used_micros = static_cast<int64_t>(used + 0.5);
    json daily = {{"limitMicros", nullptr},
                  {"usedMicros", used_micros},
                  {"remainingMicros", nullptr},
                  {"window", "24h"}};
    if (caller.daily_limit_micros) {
      daily["limitMicros"] = *caller.daily_limit_micros;
      daily["remainingMicros"] = std::max<int64_t>(0, *caller.daily_limit_micros - used_micros);
    }
    ex.SendJson(200, json{{"access", "full"}, {"daily", daily}, {"trial", nullptr}});
  });

  r.Add("GET", "/v1/usage", [&ctx](Exchange& ex) {
    std::string group_by = ex.Query("groupBy").value_or("");
    if (group_by == "label") {
      auto name = ex.Query("label");
      if (!name || name->empty())
        throw InvalidField("query.label", "names the label to group by (groupBy=label&label=team)");
      group_by = "label:" + *name;
    }
    if (!group_by.empty() && group_by != "key" && group_by.rfind("label:", 0) != 0)
      throw InvalidField("query.groupBy", "must be key, label (with label=NAME) or label:NAME");
    // Include what running sandboxes used until now: read them first, so
    // that `now` (on the ledger's clock) is not older than those rows.
    ctx.sandboxes.MeterAll(/*flush_all=*/true);
    int64_t now = StableNowMs();
    int64_t to = QueryTime(ex, "to", now + 1);
    int64_t from = QueryTime(ex, "from", now - 30 * 86400000LL);
    if (from >= to) throw InvalidField("query.from", "must be before query.to");
    json data = json::array();
    json total = {{"cpuSeconds", 0.0}, {"gibHours", 0.0}, {"gbMonths", 0.0}, {"costMicros", 0}};
    double micros = 0;
    for (const auto& t : ctx.sandboxes.UsageTotals(from, to, group_by, OwnerScope(ex))) {
      data.push_back({{"group", t.group},
                      {"cpuSeconds", t.cpu_seconds},
                      {"gibHours", t.gib_hours},
                      {"gbMonths", t.gb_months},
                      {"costMicros", static_cast<int64_t>(t.micros + 0.5)},
                      {"sandboxes", t.sandboxes}});
      total["cpuSeconds"] = total["cpuSeconds"].get<double>() + t.cpu_seconds;
      total["gibHours"] = total["gibHours"].get<double>() + t.gib_hours;
      total["gbMonths"] = total["gbMonths"].get<double>() + t.gb_months;
      micros += t.micros;
    }
    total["costMicros"] = static_cast<int64_t>(micros + 0.5);
    ex.SendJson(200, json{{"from", FormatTime(from)},
                          {"to", FormatTime(to)},
                          {"groupBy", group_by.empty() ? json(nullptr) : json(group_by)},
                          {"unit", "micros"},
                          {"prices", ctx.sandboxes.prices().ToJson()},
                          {"data", data},
                          {"total", total}});
  });
}

}  // namespace kiln::api
