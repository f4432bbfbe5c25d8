// Egress rules and log: GET/PUT /v1/sandboxes/{id}/network,
// GET /v1/sandboxes/{id}/network/log.
#include "api/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/requests.h"
#include "api/kiln/routes.h"

namespace kiln::api::v1 {

using nlohmann::json;

void AddNetworkRoutes(Router& r, ApiContext& ctx) {
  r.Add("GET", "/v1/sandboxes/{id}/network", [&ctx](Exchange& ex) {
    ex.SendJson(200, NetworkPolicyJson(FindSandbox(ctx, ex)->Record()));
  });

  r.Add("PUT", "/v1/sandboxes/{id}/network", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    network::Policy policy = ReadNetworkPut(ex.JsonBody());
    ValueOrThrow(ctx.sandboxes.SetNetwork(s, policy));
    ex.SendJson(200, NetworkPolicyJson(s->Record()));
  });

  r.Add("GET", "/v1/sandboxes/{id}/network/log", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    EgressLogQuery q = ReadEgressLogQuery(ex);
    control::EgressLog::Page page = ctx.egress_log.Read(s->id(), q.after, q.limit);
    json data = json::array();
    for (const auto& e : page.entries) data.push_back(EgressEntryJson(e));
    ex.SendJson(200, PageJson(std::move(data),
                              page.next_cursor ? std::optional(std::to_string(*page.next_cursor))
                                               : std::nullopt));
  });
}

}  // namespace kiln::api::v1
