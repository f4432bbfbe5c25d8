#include "api/router.h"

#include "api/errors.h"

namespace kiln::api {
namespace {

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

void Router::Add(const std::string& method, const std::string& pattern, Handler handler) {
  routes_.push_back(Route{method, pattern, Split(pattern), std::move(handler)});
}

bool Router::Match(const Route& r, const std::vector<std::string>& segs,
                   std::map<std::string, std::string>* params) {
  // A last segment "{name...}" takes what is left, even nothing.
  bool rest = !r.segments.empty() && r.segments.back().ends_with("...}");
  size_t fixed = rest ? r.segments.size() - 1 : r.segments.size();
  if (rest ? segs.size() < fixed : segs.size() != fixed) return false;
  std::map<std::string, std::string> found;
  if (rest) {
    const std::string& p = r.segments.back();
    std::string joined;
    for (size_t i = fixed; i < segs.size(); ++i) joined += (i > fixed ? "/" : "") + segs[i];
    found[p.substr(1, p.size() - 5)] = joined;
  }
  for (size_t i = 0; i < fixed; ++i) {
    const std::string& p = r.segments[i];
    const std::string& s = segs[i];
    if (size_t open = p.find('{'); open != std::string::npos) {
      size_t close = p.find('}');
      std::string prefix = p.substr(0, open);  // "sha256:" or ""
      std::string name = p.substr(open + 1, close - open - 1);
      std::string suffix = p.substr(close + 1);  // ":exec" or ""
      if (s.size() <= prefix.size() + suffix.size() || s.compare(0, prefix.size(), prefix) != 0 ||
          s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0)
        return false;
      std::string value = s.substr(prefix.size(), s.size() - prefix.size() - suffix.size());
      if (suffix.empty() && value.find(':') != std::string::npos) return false;
      found[name] = value;
    } else if (p != s) {
      return false;
    }
  }
  *params = std::move(found);
  return true;
}

void Router::Dispatch(Exchange& ex) const { HandlerFor(ex)(ex); }

const Handler& Router::HandlerFor(Exchange& ex) const {
  auto segs = Split(ex.path());
  bool path_known = false;
  for (const auto& r : routes_) {
    std::map<std::string, std::string> params;
    if (!Match(r, segs, &params)) continue;
    path_known = true;
    if (r.method != ex.method() && r.method != "*") continue;
    ex.params = std::move(params);
    return r.handler;
  }
  if (path_known)
    throw ApiError(Code::kMethodNotAllowed, ex.method() + " is not allowed on " + ex.path());
  throw ApiError(Code::kRouteNotFound, "no route " + ex.method() + " " + ex.path());
}

std::string Router::PatternFor(const std::string& path) const {
  auto segs = Split(path);
  std::map<std::string, std::string> params;
  for (const auto& r : routes_) {
    if (Match(r, segs, &params)) return r.pattern;
  }
  return "unmatched";
}

std::vector<std::string> Router::Routes() const {
  std::vector<std::string> out;
  for (const auto& r : routes_) out.push_back(r.method + " " + r.pattern);
  return out;
}

}  // namespace kiln::api
