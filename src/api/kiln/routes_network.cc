// Egress rules and log: GET/PUT /v1/sandboxes/{id}/network,
// GET /v1/sandboxes/{id}/network/log.
#include "api/errors.h"
#include "api/kiln/presenters.h"
#include "api/kiln/routes.h"
#include "api/validate.h"
#include "common/time.h"

namespace kiln::api {

using nlohmann::json;

namespace {

constexpr int kLogPageMax = 500;

json EntryJson(const store::EgressEntry& e) {
  return json{{"id", std::to_string(e.seq)},
              {"time", FormatTime(e.start_ms)},
              {"method", e.method},
              {"host", e.host},
              {"address", e.address.empty() ? json(nullptr) : json(e.address)},
              {"port", e.port},
              {"verdict", e.verdict},
              {"bytesOut", e.bytes_out},
              {"bytesIn", e.bytes_in},
              {"durationMs", e.duration_ms},
              {"open", e.open},
              {"closedBy", e.closed_by.empty() ? json(nullptr) : json(e.closed_by)}};
}

// The issue of a policy error, in FieldReader's terms.
void AddIssue(FieldReader& f, const network::PolicyError& error, const std::string& whole) {
  f.Issue(error.path.empty() ? whole : error.path, error.message);
}

}  // namespace

std::optional<network::Policy> ReadNetworkField(FieldReader& f) {
  const json* raw = f.Raw("network");
  if (!raw || raw->is_null()) return std::nullopt;
  network::PolicyError error;
  auto policy = network::ParsePolicy(*raw, "network", &error);
  if (!policy) AddIssue(f, error, "network");
  return policy;
}

void AddNetworkRoutes(Router& r, ApiContext& ctx) {
  r.Add("GET", "/v1/sandboxes/{id}/network", [&ctx](Exchange& ex) {
    ex.SendJson(200, NetworkPolicyJson(FindSandbox(ctx, ex)->Record()));
  });

  r.Add("PUT", "/v1/sandboxes/{id}/network", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    const json& body = ex.JsonBody();
    network::PolicyError error;
    std::optional<network::Policy> policy;
    if (body.is_object() && !body.contains("internet")) {
      error = {"internet", "is required: true or false (a PUT replaces every rule)"};
    } else {
      policy = network::ParsePolicy(body, "", &error);
    }
    if (!policy)
      throw InvalidField(error.path.empty() ? "body" : "body." + error.path, error.message);
    ValueOrThrow(ctx.sandboxes.SetNetwork(s, *policy));
    ex.SendJson(200, NetworkPolicyJson(s->Record()));
  });

  r.Add("GET", "/v1/sandboxes/{id}/network/log", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    int limit = static_cast<int>(QueryInt(ex, "limit", 1, kLogPageMax, 100));
    int64_t after = 0;
    if (auto c = ex.Query("cursor")) {
      try {
        size_t used = 0;
        after = std::stoll(*c, &used);
        if (used != c->size() || after < 0) throw std::invalid_argument("cursor");
      } catch (...) {
        throw InvalidField("query.cursor", "is not a cursor from a previous answer");
      }
    }
    auto entries = ctx.egress_log.List(s->id(), after, limit + 1);
    bool more = static_cast<int>(entries.size()) > limit;
    if (more) entries.resize(static_cast<size_t>(limit));
    json data = json::array();
    for (const auto& e : entries) data.push_back(EntryJson(e));
    ex.SendJson(
        200, json{{"data", data},
                  {"nextCursor", more ? json(std::to_string(entries.back().seq)) : json(nullptr)}});
  });
}

}  // namespace kiln::api
