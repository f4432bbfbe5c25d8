// PandaStack's errors: {"error": "message"} (what its client shows), with
// kiln's code beside it; the front's dialect; and the refusals of the
// features kiln lacks.
#include <array>
#include <utility>

#include "api/errors.h"
#include "api/front.h"
#include "api/pandastack/pandastack.h"

namespace kiln::api::pandastack {

using nlohmann::json;

int HttpStatus(Code code) {
  switch (code) {
    // The client resends a create refused with 503 + Retry-After + a JSON
    // error (its "no compute capacity"), which is what no_capacity means.
    case Code::kNoCapacity:
      return 503;
    // A feature the server does not implement, not a bad request.
    case Code::kNotSupported:
      return 501;
    default:
      return api::HttpStatus(code);
  }
}

void SendError(Exchange& ex, const Status& s) {
  if (ex.responded()) return;  // a stream already began; it ends as it can
  int status = HttpStatus(s.code());
  int retry = s.retry_after_s() > 0 ? s.retry_after_s() : s.code() == Code::kNoCapacity ? 5 : 0;
  if (retry > 0) ex.extra_headers.emplace_back("Retry-After", std::to_string(retry));
  ex.SendJson(status, ErrorBody(s));
}

json ErrorBody(const Status& s) {
  json body{{"error", s.message()}, {"code", CodeName(s.code())}};
  if (s.details().is_object()) {
    for (const auto& [k, v] : s.details().items()) {
      if (k != "error" && k != "code") body[k] = v;
    }
  }
  if (s.retry_after_s() > 0) body["retry_after_seconds"] = s.retry_after_s();
  return body;
}

namespace {

// The first path segment after /pandastack/v1 (or after sandboxes/{id}/)
// that names a PandaStack feature, and why kiln does not offer it.
struct Feature {
  const char* segment;
  const char* name;
  const char* why;
};

constexpr std::array<Feature, 14> kFeatures{{
    {"apps", "apps", "kiln runs sandboxes, not hosted apps"},
    {"databases", "databases", "kiln hosts no databases; run one inside a sandbox"},
    {"volumes", "volumes", "kiln has no volumes; keep data in a snapshot or an image"},
    {"functions", "functions", "kiln has no serverless functions; exec in a sandbox"},
    {"schedules", "schedules", "kiln has no scheduler; run the schedule outside"},
    {"tokens", "tokens", "kiln keys are managed with `kiln keys` or /v1/keys"},
    {"me", "me", "kiln has no workspaces or accounts; a key is the identity"},
    {"repl", "code contexts", "kiln has no code-interpreter kernels; exec python3 instead"},
    {"logs", "sandbox logs", "kiln keeps no sandbox log; read a process's output via /v1"},
    {"promote", "promote", "kiln forks are independent sandboxes already; delete the others"},
    {"build", "template builds", "build kiln images with POST /v1/images or `kiln image build`"},
    {"builds", "template builds", "build kiln images with POST /v1/images or `kiln image build`"},
    {"explore", "explore", "fork with fork_tree and score outside"},
    {"cma", "cma workers", "kiln has no managed agent workers"},
}};

}  // namespace

Status Unsupported(const std::string& method, const std::string& path) {
  std::string rest = path.rfind(kPrefix, 0) == 0 ? path.substr(std::string(kPrefix).size()) : path;
  // Every segment is looked up: /sandboxes/{id}/repl/sessions names repl,
  // /templates/build names build.
  std::string feature = "this route", why = "kiln does not serve it";
  bool found = false;
  for (size_t start = 1; start < rest.size() && !found;) {
    size_t end = rest.find('/', start);
    std::string seg = rest.substr(start, end == std::string::npos ? end : end - start);
    for (const auto& f : kFeatures) {
      if (seg == f.segment) {
        feature = f.name;
        why = f.why;
        found = true;
        break;
      }
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return Status(
      Code::kNotSupported,
      "kiln does not offer PandaStack's " + feature + " (" + method + " " + path + "): " + why,
      json{{"feature", feature}});
}

}  // namespace kiln::api::pandastack

namespace kiln::api {

ApiFront::Dialect PandaStackDialect() {
  ApiFront::Dialect d;
  d.prefix = std::string(pandastack::kPrefix) + "/";
  // The client sends a kiln key as kiln's do (Authorization: Bearer), and
  // reads kiln's shape for what is refused before a route runs.
  d.send_error = [](Exchange& ex, const Status& s) { pandastack::SendError(ex, s); };
  d.errors = ApiFront::Dialect::Errors::kRoutes;
  return d;
}

}  // namespace kiln::api
