// Maps "METHOD /path" to handlers. Patterns name parameters in braces and
// may end a segment with a verb: "/v1/sandboxes/{id}:exec"; a last segment
// "{rest...}" takes the rest of the path. Method "*" is any method.
#pragma once

#include <string>
#include <vector>

#include "api/http_server.h"

namespace kiln::api {

class Router {
 public:
  void Add(const std::string& method, const std::string& pattern, Handler handler);
  // Runs the matching handler; 404 route_not_found / 405 method_not_allowed.
  void Dispatch(Exchange& ex) const;
  // The matching handler, its path parameters set in `ex.params`; throws
  // as Dispatch does when none matches. ApiFront tells a route's errors
  // from routing's own by it.
  const Handler& HandlerFor(Exchange& ex) const;
  // "GET /v1/sandboxes" ... for the OpenAPI check and docs.
  std::vector<std::string> Routes() const;
  // The pattern that `path` matches under any method, or "unmatched": a
  // bounded label for metrics and logs.
  std::string PatternFor(const std::string& path) const;

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<std::string> segments;
    Handler handler;
  };
  static bool Match(const Route& r, const std::vector<std::string>& segs,
                    std::map<std::string, std::string>* params);
  std::vector<Route> routes_;
};

}  // namespace kiln::api
