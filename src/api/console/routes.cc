#include "api/console/routes.h"

#include "api/errors.h"

namespace kiln::api {

const char kConsoleCsp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

namespace {

// "gzip" among Accept-Encoding's codings, unless refused with q=0.
bool AcceptsGzip(std::string_view header) {
  while (!header.empty()) {
    size_t comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    if (!item.starts_with("gzip")) continue;
    std::string_view rest = item.substr(4);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (rest.empty()) return true;
    if (rest.front() != ';') continue;
    size_t q = rest.find("q=");
    if (q == std::string_view::npos) return true;
    std::string_view v = rest.substr(q + 2);
    return !(v.starts_with("0") && v.find_first_not_of("0. ") == std::string_view::npos);
  }
  return false;
}

}  // namespace

void AddConsoleRoutes(Router& r, const ConsoleFiles& files) {
  // Relative asset paths in index.html need the trailing slash.
  r.Add("GET", "/ui", [](Exchange& ex) {
    ex.SendBytes(308, "", "text/plain", {{"Location", "/ui/"}});
  });
  r.Add("GET", "/ui/{path...}", [&files](Exchange& ex) {
    if (files.empty())
      throw ApiError(Code::kNotFound,
                     "the web console is not built: run `make setup` (it builds console/ into "
                     "build/console), or start kilnd with --console-dir DIR");
    std::string name = ex.params["path"].empty() ? "index.html" : ex.params["path"];
    const ConsoleFiles::File* f = files.Find(name);
    if (!f) throw ApiError(Code::kNotFound, "the console has no file /ui/" + name);
    std::vector<std::pair<std::string, std::string>> headers = {
        {"Content-Security-Policy", kConsoleCsp},
        {"X-Content-Type-Options", "nosniff"},
        {"X-Frame-Options", "DENY"},
        {"Referrer-Policy", "no-referrer"},
        {"Cache-Control", "no-cache"},
        {"Vary", "Accept-Encoding"}};
    bool gzip = !f->gzip.empty() && AcceptsGzip(ex.Header("Accept-Encoding"));
    const std::string& etag = gzip ? f->gzip_etag : f->etag;
    headers.emplace_back("ETag", etag);
    if (gzip) headers.emplace_back("Content-Encoding", "gzip");
    if (ex.Header("If-None-Match") == etag) return ex.SendBytes(304, "", f->content_type, headers);
    ex.SendBytes(200, gzip ? f->gzip : f->bytes, f->content_type, headers);
  });
}

}  // namespace kiln::api
