// kiln's presenters (presenters.h) for images: ImageInfo, registry
// credentials, build contexts, build logs.
#include "api/kiln/presenters.h"

#include "common/time.h"

namespace kiln::api::v1 {

using nlohmann::json;

json ImageJson(const images::ImageRecord& r, const control::PoolStatus& warm_pool) {
  json pool = PoolJson(warm_pool);
  return json{{"id", r.id},
              {"kind", "image"},
              {"name", r.name == r.id ? json(nullptr) : json(r.name)},  // unnamed
              {"version", r.version},
              {"tags", r.tags},
              {"labels", r.labels},
              {"state", images::ImageStateName(r.state)},
              {"source", images::SourceName(r.source)},
              {"ref", OrNull(r.ref)},
              {"digest", OrNull(r.digest)},
              {"sizeBytes", r.size_bytes},
              {"layers", r.layers.size()},
              {"stepsTotal", r.steps_total},
              {"stepsCached", r.steps_cached},
              {"stepsRun", r.steps_run.value_or(0)},
              {"config", r.config ? images::ConfigJson(*r.config) : json(nullptr)},
              {"start", r.start ? images::StartJson(*r.start) : json(nullptr)},
              {"sudo", r.sudo},
              {"build", r.build ? images::BuildJson(*r.build) : json(nullptr)},
              {"pool", pool},
              {"warm", r.warm_snapshot.has_value()},
              {"error", r.error},
              {"createdAt", TimeOrNull(r.created_ms)},
              {"readyAt", TimeOrNull(r.ready_ms)},
              {"endedAt", TimeOrNull(r.ended_ms)}};
}

json RegistryJson(const store::RegistryCredential& c) {
  return json{
      {"registry", c.registry}, {"username", c.username}, {"createdAt", FormatTime(c.created_ms)}};
}

json RegistryDeletedJson(const std::string& registry) {
  return json{{"registry", registry}, {"deleted", true}};
}

json ContextUploadJson(const images::ContextUpload& upload) {
  return json{{"digest", upload.digest}, {"sizeBytes", upload.size_bytes}};
}

json MissingContextsJson(const std::vector<std::string>& missing) {
  return json{{"missing", missing}};
}

json BuildLogPageJson(const images::LogPage& page, images::ImageState state) {
  return json{{"lines", page.lines},
              {"nextAfter", page.next_after},
              {"state", images::ImageStateName(state)},
              {"truncated", page.truncated},
              {"done", page.done}};
}

json BuildLogLineEventJson(const images::LogLine& line) {
  json event = line;
  event["type"] = "line";
  event["seq"] = line.n;
  return event;
}

json BuildLogDoneEventJson(json image) {
  return json{{"type", "done"}, {"image", std::move(image)}};
}

json BuildLogContinueEventJson(int64_t after) {
  return json{{"type", "continue"}, {"after", after}};
}

}  // namespace kiln::api::v1
