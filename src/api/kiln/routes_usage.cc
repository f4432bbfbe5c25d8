// GET /v1/usage: metered totals from the usage ledger (also per time
// bucket, for the console's chart); GET /v1/limits: a key's daily spend;
// GET /v1/capacity: the host's room and warm pools now.
#include "api/auth.h"
#include "api/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/requests.h"
#include "api/kiln/routes.h"
#include "common/time.h"

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

// The ledger's totals over [from, to), per group and in all.
json Totals(ApiContext& ctx, int64_t from, int64_t to, const std::string& group_by,
            const std::optional<std::string>& scope) {
  return UsageTotalsJson(ctx.sandboxes.usage().Totals(from, to, group_by, scope));
}

}  // namespace

void AddUsageRoutes(Router& r, ApiContext& ctx) {
  // The reference's limits: a key's daily spending limit over the last 24
  // hours (null when it has none). A local daemon has no trial.
  r.Add("GET", "/v1/limits", [&ctx](Exchange& ex) {
    const Caller& caller = CallerOf(ex);
    ctx.sandboxes.MeterAll(/*flush_all=*/true);
    double used = ctx.sandboxes.usage().SpentMicrosSince(caller.key_id, StableNowMs() - 86400000);
    ex.SendJson(200, LimitsJson(static_cast<int64_t>(used + 0.5), caller.daily_limit_micros));
  });

  // The room the host has now: what the console draws as gauges. Any key
  // may read it (a create's wait depends on it); a non-admin sees only the
  // pools of its own snapshots.
  r.Add("GET", "/v1/capacity", [&ctx](Exchange& ex) {
    control::Capacity::Stats stats = ctx.sandboxes.CapacityStats();
    json pools = json::array();
    auto scope = OwnerScope(ex);
    for (const auto& [id, pool] : ctx.sandboxes.snapshots().Pools()) {
      if (scope) {
        try {
          (void)FindSnapshot(ctx, ex, id);
        } catch (const ApiError&) {
          continue;  // another key's
        }
      }
      pools.push_back(CapacityPoolJson(id, pool));
    }
    ex.SendJson(200, CapacityJson(stats, ctx.sandboxes.capacity_limits(), std::move(pools)));
  });

  r.Add("GET", "/v1/usage", [&ctx](Exchange& ex) {
    std::string group_by = ReadUsageGroupBy(ex);
    // Include what running sandboxes used until now: read them first, so
    // that `now` (on the ledger's clock) is not older than those rows.
    ctx.sandboxes.MeterAll(/*flush_all=*/true);
    UsageSpan span = ReadUsageSpan(ex, StableNowMs());
    auto scope = OwnerScope(ex);
    json totals = Totals(ctx, span.from, span.to, group_by, scope);
    json buckets;  // null: none asked for
    if (span.bucket_ms) {
      buckets = json::array();
      for (int64_t at = span.from; at < span.to; at += *span.bucket_ms) {
        int64_t end = std::min(span.to, at + *span.bucket_ms);
        buckets.push_back(UsageBucketJson(at, end, Totals(ctx, at, end, group_by, scope)));
      }
    }
    ex.SendJson(200, UsageJson(span.from, span.to, span.bucket_ms, group_by,
                               ctx.sandboxes.prices().ToJson(), totals, std::move(buckets)));
  });
}

}  // namespace kiln::api::v1
