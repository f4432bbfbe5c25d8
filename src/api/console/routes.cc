#include "api/console/routes.h"

#include "api/errors.h"

namespace kiln::api {

const char kConsoleCsp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

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
        {"ETag", f->etag}};
    if (ex.Header("If-None-Match") == f->etag)
      return ex.SendBytes(304, "", f->content_type, headers);
    ex.SendBytes(200, f->bytes, f->content_type, headers);
  });
}

}  // namespace kiln::api
