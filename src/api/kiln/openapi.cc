#include "api/kiln/openapi.h"
#include "common/strings.h"

#include <cctype>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace kiln::api::v1 {

using nlohmann::json;

namespace {

// The keys of an OpenAPI path item that are operations (it may hold others,
// such as "parameters").
constexpr const char* kMethods[] = {"get",     "put",  "post",  "delete",
                                    "options", "head", "patch", "trace"};

// Router methods are upper case ("GET"), OpenAPI's keys lower case ("get").

// The {name} parameters of a router pattern: "/v1/x/{id}:exec" names "id".
std::vector<std::string> PathParams(const std::string& pattern) {
  std::vector<std::string> names;
  size_t open = 0;
  while ((open = pattern.find('{', open)) != std::string::npos) {
    size_t close = pattern.find('}', open);
    if (close == std::string::npos) break;
    names.push_back(pattern.substr(open + 1, close - open - 1));
    open = close + 1;
  }
  return names;
}

// A route the document lacks: just enough to stay a valid OpenAPI operation
// (unique operationId, declared path parameters) and to be found by a test.
json Undocumented(const std::string& method, const std::string& pattern) {
  std::string id = "undocumented_" + method + pattern;
  for (char& c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  json op = {{"operationId", id},
             {"summary", "Undocumented route " + method + " " + pattern},
             {"x-kiln-undocumented", true},
             {"responses", {{"default", {{"description", "Not described in openapi.json."}}}}}};
  json params = json::array();
  for (const auto& name : PathParams(pattern)) {
    params.push_back(
        {{"name", name}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}});
  }
  if (!params.empty()) op["parameters"] = params;
  return op;
}

}  // namespace

json OpenApiDocument(const Router& router) {
  json doc = json::parse(kOpenApiJson);
  doc["info"]["version"] = KILN_VERSION;  // the binary's, not whatever the file says
  json& paths = doc["paths"];
  std::set<std::string> routed;
  for (const std::string& route : router.Routes()) {
    routed.insert(route);
    size_t space = route.find(' ');
    std::string method = route.substr(0, space);
    std::string pattern = route.substr(space + 1);
    if (method == "*") {  // any method: each documented one is routed
      for (const char* m : kMethods) routed.insert(AsciiUpper(m) + " " + pattern);
      if (!paths.contains(pattern)) paths[pattern]["get"] = Undocumented("GET", pattern);
      continue;
    }
    json& item = paths[pattern];
    std::string key = AsciiLower(method);
    if (!item.contains(key)) item[key] = Undocumented(method, pattern);
  }
  json unrouted = json::array();
  for (const auto& [pattern, item] : paths.items()) {
    for (const char* m : kMethods) {
      if (!item.contains(m) || item[m].value("x-kiln-undocumented", false)) continue;
      std::string route = AsciiUpper(m) + " " + pattern;
      if (!routed.count(route)) unrouted.push_back(route);
    }
  }
  if (!unrouted.empty()) doc["x-kiln-unrouted"] = unrouted;
  return doc;
}

void AddOpenApiRoutes(Router& r) {
  // Built at the first request, once every route is registered (routes do
  // not change while serving); request threads race for it, hence once_flag.
  struct Cache {
    std::once_flag once;
    json doc;
  };
  auto cache = std::make_shared<Cache>();
  r.Add("GET", "/v1/openapi.json", [&r, cache](Exchange& ex) {
    std::call_once(cache->once, [&] { cache->doc = OpenApiDocument(r); });
    ex.SendJson(200, cache->doc);
  });
}

}  // namespace kiln::api::v1
