// GET /v1/usage: metered totals from the usage ledger (also per time
// bucket, for the console's chart); GET /v1/limits: a key's daily spend;
// GET /v1/capacity: the host's room and warm pools now.
#include "api/auth.h"
#include "api/errors.h"
#include "api/kiln/routes.h"
#include "api/validate.h"
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

// A chart's worth: a day in 5-minute buckets is 288.
constexpr int64_t kMaxBuckets = 500;

struct Totals {
  json data = json::array();
  json total;
};

// The ledger's totals over [from, to), per group and in all.
Totals Sum(ApiContext& ctx, int64_t from, int64_t to, const std::string& group_by,
           const std::optional<std::string>& scope) {
  Totals out;
  double cpu = 0, gib_hours = 0, gb_months = 0, micros = 0;
  for (const auto& t : ctx.sandboxes.UsageTotals(from, to, group_by, scope)) {
    out.data.push_back({{"group", t.group},
                        {"cpuSeconds", t.cpu_seconds},
                        {"gibHours", t.gib_hours},
                        {"gbMonths", t.gb_months},
                        {"costMicros", static_cast<int64_t>(t.micros + 0.5)},
                        {"sandboxes", t.sandboxes}});
    cpu += t.cpu_seconds;
    gib_hours += t.gib_hours;
    gb_months += t.gb_months;
    micros += t.micros;
  }
  out.total = {{"cpuSeconds", cpu},
               {"gibHours", gib_hours},
               {"gbMonths", gb_months},
               {"costMicros", static_cast<int64_t>(micros + 0.5)}};
  return out;
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

  // The room the host has now: what the console draws as gauges. Any key
  // may read it (a create's wait depends on it); a non-admin sees only the
  // pools of its own snapshots.
  r.Add("GET", "/v1/capacity", [&ctx](Exchange& ex) {
    control::Capacity::Stats st = ctx.sandboxes.CapacityStats();
    const control::CapacityLimits& lim = ctx.sandboxes.capacity_limits();
    int64_t mem_budget = lim.memory_budget_mib();
    double vcpu_budget = lim.vcpu_budget();
    int64_t disk_budget = lim.disk_budget_mib();
    bool disk_counted = disk_budget != INT64_MAX;
    json pools = json::array();
    auto scope = OwnerScope(ex);
    for (const auto& [id, pool] : ctx.sandboxes.Pools()) {
      if (scope) {
        try {
          (void)FindSnapshot(ctx, ex, id);
        } catch (const ApiError&) {
          continue;  // another key's
        }
      }
      pools.push_back({{"kind", "snapshot"},
                       {"id", id},
                       {"size", pool.size},
                       {"ready", pool.ready},
                       {"memoryBytes", pool.memory_bytes}});
    }
    ex.SendJson(200, json{{"running", st.running},
                          {"queued", st.waiting},
                          {"pooled", st.pooled},
                          {"memoryMiB",
                           {{"budget", mem_budget},
                            {"reserved", st.reserved_memory_mib},
                            {"free", std::max<int64_t>(0, mem_budget - st.reserved_memory_mib)}}},
                          {"vcpus",
                           {{"budget", vcpu_budget},
                            {"reserved", st.reserved_vcpus},
                            {"free", std::max(0.0, vcpu_budget - st.reserved_vcpus)}}},
                          {"diskMiB",
                           {{"budget", disk_counted ? json(disk_budget) : json(nullptr)},
                            {"reserved", st.reserved_disk_mib},
                            {"free", disk_counted ? json(std::max<int64_t>(
                                                        0, disk_budget - st.reserved_disk_mib))
                                                  : json(nullptr)}}},
                          {"pools", pools}});
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
    std::optional<int64_t> bucket_ms;
    if (ex.Query("bucketSeconds")) {
      bucket_ms = QueryInt(ex, "bucketSeconds", 60, 86400, 3600) * 1000;
      if ((to - from + *bucket_ms - 1) / *bucket_ms > kMaxBuckets)
        throw InvalidField("query.bucketSeconds",
                           "gives more than " + std::to_string(kMaxBuckets) +
                               " buckets between from and to: use a larger one or a shorter span");
    }
    auto scope = OwnerScope(ex);
    Totals all = Sum(ctx, from, to, group_by, scope);
    json answer = {{"from", FormatTime(from)},
                   {"to", FormatTime(to)},
                   {"groupBy", group_by.empty() ? json(nullptr) : json(group_by)},
                   {"unit", "micros"},
                   {"prices", ctx.sandboxes.prices().ToJson()},
                   {"data", all.data},
                   {"total", all.total}};
    if (bucket_ms) {
      json buckets = json::array();
      for (int64_t at = from; at < to; at += *bucket_ms) {
        int64_t end = std::min(to, at + *bucket_ms);
        Totals b = Sum(ctx, at, end, group_by, scope);
        buckets.push_back({{"from", FormatTime(at)},
                           {"to", FormatTime(end)},
                           {"data", b.data},
                           {"total", b.total}});
      }
      answer["bucketSeconds"] = *bucket_ms / 1000;
      answer["buckets"] = buckets;
    }
    ex.SendJson(200, answer);
  });
}

}  // namespace kiln::api
