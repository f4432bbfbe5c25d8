// The OpenAPI document (src/api/kiln/openapi.json, src/api/kiln/openapi.h): it parses,
// every operation is complete and every $ref resolves, it matches the routes
// registered in src/api, and the router check marks both kinds of drift.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api/kiln/openapi.h"
#include "api/router.h"
#include "fakes/fake_exchange.h"

namespace kiln::api::v1 {
namespace openapi_test {
namespace {

using nlohmann::json;
using testutil::FakeExchange;

constexpr const char* kMethods[] = {"get",     "put",  "post",  "delete",
                                    "options", "head", "patch", "trace"};

void Noop(Exchange& ex) { ex.SendJson(200, json::object()); }

// What a $ref names, or the value itself.
const json& Resolve(const json& doc, const json& v) {
  if (v.is_object() && v.contains("$ref"))
    return doc.at(json::json_pointer(v["$ref"].get<std::string>().substr(1)));
  return v;
}

void CollectRefs(const json& v, std::vector<std::string>* refs) {
  if (v.is_object()) {
    for (const auto& [k, child] : v.items()) {
      if (k == "$ref" && child.is_string()) refs->push_back(child.get<std::string>());
      CollectRefs(child, refs);
    }
  } else if (v.is_array()) {
    for (const auto& child : v) CollectRefs(child, refs);
  }
}

// Problems with the operations of `doc`, one line each (empty: none).
std::vector<std::string> OperationProblems(const json& doc) {
  std::vector<std::string> problems;
  std::set<std::string> ids;
  for (const auto& [path, item] : doc.at("paths").items()) {
    std::set<std::string> templated;  // {name}s of the path
    for (size_t open = path.find('{'); open != std::string::npos; open = path.find('{', open)) {
      size_t close = path.find('}', open);
      templated.insert(path.substr(open + 1, close - open - 1));
      open = close;
    }
    for (const char* m : kMethods) {
      if (!item.contains(m)) continue;
      const json& op = item[m];
      std::string where = std::string(m) + " " + path + ": ";
      std::string id = op.value("operationId", "");
      if (id.empty()) problems.push_back(where + "no operationId");
      if (!id.empty() && !ids.insert(id).second) problems.push_back(where + "repeats " + id);
      if (op.value("summary", "").empty()) problems.push_back(where + "no summary");
      if (!op.contains("responses") || op["responses"].empty()) {
        problems.push_back(where + "no responses");
        continue;
      }
      // A routed path parameter is declared; an undeclared one breaks clients.
      std::set<std::string> declared;
      for (const auto& p : op.value("parameters", json::array())) {
        const json& param = Resolve(doc, p);
        if (param.value("in", "") == "path") declared.insert(param.value("name", ""));
      }
      if (declared != templated) problems.push_back(where + "path parameters do not match");
      if (op.value("x-kiln-undocumented", false)) continue;  // minimal by design
      for (const auto& [status, r] : op["responses"].items()) {
        const json& resp = Resolve(doc, r);
        // A sandbox's server's own answer, relayed as it is (a port's HTTP).
        if (resp.value("x-kiln-relayed", false)) continue;
        if (!resp.contains("headers") || !resp["headers"].contains("x-request-id"))
          problems.push_back(where + status + " lacks the x-request-id header");
      }
    }
  }
  return problems;
}

// "METHOD /pattern" of every operation the document describes.
std::vector<std::string> DocumentedRoutes(const json& doc) {
  std::vector<std::string> out;
  for (const auto& [path, item] : doc.at("paths").items()) {
    for (const char* m : kMethods) {
      if (!item.contains(m)) continue;
      std::string method = m;
      for (char& c : method) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      out.push_back(method + " " + path);
    }
  }
  return out;
}

std::vector<std::string> Undocumented(const json& doc) {
  std::vector<std::string> out;
  for (const auto& [path, item] : doc.at("paths").items()) {
    for (const auto& [m, op] : item.items()) {
      if (op.is_object() && op.value("x-kiln-undocumented", false)) out.push_back(m + " " + path);
    }
  }
  return out;
}

json Unrouted(const json& doc) { return doc.value("x-kiln-unrouted", json::array()); }

bool Contains(const json& list, const std::string& s) {
  for (const auto& v : list) {
    if (v == s) return true;
  }
  return false;
}

TEST(OpenApiTest, EmbeddedDocumentParses) {
  json doc = json::parse(kOpenApiJson);  // throws (fails) if the file is not JSON
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc.value("openapi", "").rfind("3.", 0), 0u) << doc.value("openapi", "");
  EXPECT_EQ(doc["info"].value("title", ""), "kiln");
  EXPECT_FALSE(doc["info"].value("version", "").empty());
  EXPECT_EQ(doc["servers"][0].value("url", ""), "http://127.0.0.1:7070");
  EXPECT_EQ(doc["components"]["securitySchemes"]["bearerAuth"].value("scheme", ""), "bearer");
  EXPECT_EQ(doc["security"], json::parse(R"([{"bearerAuth": []}])"));
  EXPECT_EQ(doc["paths"]["/v1/health"]["get"]["security"], json::array());
  for (const char* name :
       {"SandboxInfo", "Snapshot", "CommandResult", "Error", "ApiKey", "Usage"}) {
    EXPECT_TRUE(doc["components"]["schemas"].contains(name)) << name;
  }
  EXPECT_FALSE(doc.contains("x-kiln-unrouted"));  // only the served document has it
}

TEST(OpenApiTest, EveryOperationIsComplete) {
  json doc = json::parse(kOpenApiJson);
  EXPECT_GE(DocumentedRoutes(doc).size(), 30u);
  for (const auto& p : OperationProblems(doc)) ADD_FAILURE() << p;
}

TEST(OpenApiTest, EveryRefResolves) {
  json doc = json::parse(kOpenApiJson);
  std::vector<std::string> refs;
  CollectRefs(doc, &refs);
  EXPECT_FALSE(refs.empty());
  for (const auto& ref : refs) {
    ASSERT_EQ(ref.rfind("#/", 0), 0u) << ref << ": only refs inside the document";
    EXPECT_TRUE(doc.contains(json::json_pointer(ref.substr(1)))) << ref << " resolves to nothing";
  }
}

TEST(OpenApiTest, MarksUndocumentedAndUnroutedRoutes) {
  Router router;
  router.Add("GET", "/v1/health", Noop);
  router.Add("POST", "/v1/sandboxes/{id}:exec", Noop);
  router.Add("POST", "/v1/frobs/{id}/knobs/{knob}:twiddle", Noop);  // a new path
  router.Add("PATCH", "/v1/sandboxes/{id}", Noop);                  // a new method
  json doc = OpenApiDocument(router);

  const json& added = doc["paths"]["/v1/frobs/{id}/knobs/{knob}:twiddle"]["post"];
  EXPECT_EQ(added.value("x-kiln-undocumented", false), true) << added.dump();
  const json& patch = doc["paths"]["/v1/sandboxes/{id}"]["patch"];
  EXPECT_EQ(patch.value("x-kiln-undocumented", false), true);
  EXPECT_FALSE(doc["paths"]["/v1/sandboxes/{id}"]["get"].contains("x-kiln-undocumented"));
  EXPECT_EQ(Undocumented(doc).size(), 2u);
  // The added operations are still valid OpenAPI (ids, path parameters).
  for (const auto& p : OperationProblems(doc)) ADD_FAILURE() << p;

  json unrouted = Unrouted(doc);
  EXPECT_TRUE(Contains(unrouted, "GET /v1/sandboxes"));
  EXPECT_TRUE(Contains(unrouted, "DELETE /v1/sandboxes/{id}"));
  EXPECT_TRUE(Contains(unrouted, "GET /v1/openapi.json"));
  EXPECT_FALSE(Contains(unrouted, "GET /v1/health"));
  EXPECT_FALSE(Contains(unrouted, "POST /v1/sandboxes/{id}:exec"));
  EXPECT_FALSE(Contains(unrouted, "PATCH /v1/sandboxes/{id}"));
  EXPECT_EQ(unrouted.size(), DocumentedRoutes(json::parse(kOpenApiJson)).size() - 2);
}

TEST(OpenApiTest, RouterMatchingTheDocumentLeavesNoMarks) {
  Router router;
  for (const auto& route : DocumentedRoutes(json::parse(kOpenApiJson))) {
    size_t space = route.find(' ');
    router.Add(route.substr(0, space), route.substr(space + 1), Noop);
  }
  json doc = OpenApiDocument(router);
  EXPECT_TRUE(Undocumented(doc).empty());
  EXPECT_FALSE(doc.contains("x-kiln-unrouted")) << doc["x-kiln-unrouted"].dump();
  EXPECT_EQ(doc["info"].value("version", ""), KILN_VERSION);
}

// The routes kilnd registers, read from the sources: the daemon's router
// needs a whole control plane, the sources do not. (The integration test
// test_openapi.py checks the live router.)
TEST(OpenApiTest, DocumentsEveryRouteOfTheSources) {
  namespace fs = std::filesystem;
  // This file is tests/unit/api/kiln/openapi_test.cc, an absolute path (CMake's).
  fs::path root = fs::path(__FILE__);
  for (int up = 0; up < 5; ++up) root = root.parent_path();
  fs::path api_dir = root / "src" / "api";
  if (!fs::is_directory(api_dir)) GTEST_SKIP() << "no sources at " << api_dir;
  static const std::regex kAdd(R"re(\.Add\(\s*"([A-Z]+|\*)"\s*,\s*"([^"]+)")re");
  Router router;
  size_t found = 0;
  for (const auto& entry : fs::recursive_directory_iterator(api_dir)) {  // every front's folder
    if (entry.path().extension() != ".cc") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    for (std::sregex_iterator it(s.begin(), s.end(), kAdd), end; it != end; ++it) {
      router.Add((*it)[1], (*it)[2], Noop);
      ++found;
    }
  }
  EXPECT_GE(found, 30u) << "the route registrations moved; update this test";
  json doc = OpenApiDocument(router);
  for (const auto& r : Undocumented(doc)) ADD_FAILURE() << "not in openapi.json: " << r;
  for (const auto& r : Unrouted(doc)) ADD_FAILURE() << "documented but not routed: " << r;
}

TEST(OpenApiTest, ServesTheDocumentBuiltAtTheFirstRequest) {
  Router router;
  router.Add("GET", "/v1/health", Noop);
  AddOpenApiRoutes(router);
  router.Add("POST", "/v1/late", Noop);  // registered after: still seen
  FakeExchange ex("GET", "/v1/openapi.json");
  router.Dispatch(ex);
  ASSERT_EQ(ex.status_, 200);
  const json& doc = ex.body_;
  EXPECT_FALSE(doc["paths"]["/v1/openapi.json"]["get"].contains("x-kiln-undocumented"));
  EXPECT_FALSE(Contains(Unrouted(doc), "GET /v1/openapi.json"));
  EXPECT_EQ(doc["paths"]["/v1/late"]["post"].value("x-kiln-undocumented", false), true);

  router.Add("POST", "/v1/later", Noop);  // after the first request: kept as built
  FakeExchange again("GET", "/v1/openapi.json");
  router.Dispatch(again);
  EXPECT_EQ(again.body_, doc);
}

}  // namespace
}  // namespace openapi_test
}  // namespace kiln::api::v1
