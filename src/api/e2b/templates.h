// Inside the e2b front: E2B's template builds (the e2b SDK's Template,
// AsyncTemplate: build, build_in_background, get_build_status, exists,
// tags) on kiln's image builder, through images::StagedBuilds.
//
// A template is a kiln image of the key's, by name ("name:tag" is kiln's
// name and tag; E2B's tag "default" is kiln's "latest"); a build is one
// version of it, and its buildID the image's id. The steps E2B's SDK sends
// become a Dockerfile (TemplateDockerfile) whose COPY steps read the
// archives the SDK uploaded, each a named context of the key's.
//
// requests_templates.cc reads the bodies, template_dockerfile.cc turns a
// build into kiln's, presenters_templates.cc renders statuses and logs,
// routes_template_builds.cc serves them. Pure functions here are
// unit-tested (tests/unit/api/e2b/templates_test.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/context.h"
#include "common/path_ids.h"
#include "common/shape.h"
#include "common/status.h"
#include "images/manager/build_log.h"
#include "images/manager/image_record.h"
#include "images/manager/image_request.h"

namespace kiln::api::e2b {

// E2B's default tag, kiln's "latest".
inline constexpr const char* kDefaultTag = "default";
// How long an E2B template's ready command may take to pass.
inline constexpr int kReadyTimeoutSeconds = 120;

// "name" or "name:tag" as E2B spells a template; kiln's reference to it
// (":default" is kiln's latest, left out).
std::string KilnTemplateRef(const std::string& e2b_name);
// A kiln tag as E2B shows it ("latest" is "default").
std::string E2bTag(const std::string& kiln_tag);

// POST /v3/templates (TemplateBuildRequestV3): {name, tags?, cpuCount?,
// memoryMB?, minFreeDiskMB?}.
struct TemplateRequest {
  std::string name;               // the kiln image's name
  std::vector<std::string> tags;  // kiln tags: name's own and `tags`; empty = latest
  ShapeGiven given;               // which of shape's dimensions the body named
  Shape shape;
};
TemplateRequest ReadTemplateRequest(const nlohmann::json& body);

// One step of a build (TemplateStep): type RUN, COPY, ENV, WORKDIR or USER.
struct TemplateStep {
  std::string type;
  std::vector<std::string> args;
  std::optional<std::string> files_hash;  // COPY's uploaded archive
  bool force = false;                     // run it and the steps after it again
};
// POST /v2/templates/{templateID}/builds/{buildID} (TemplateBuildStartV2).
struct TemplateBuild {
  std::optional<std::string> from_image;     // an OCI reference
  std::optional<std::string> from_template;  // a template of the key's (a kiln image)
  bool force = false;                        // the whole build skips the cache
  std::vector<TemplateStep> steps;
  std::optional<std::string> start_cmd, ready_cmd;
};
// Issues name the field ("body.steps[2].args"); fromImageRegistry (a pull's
// own credentials) is refused by name: kiln keeps a key's registry
// credentials itself (POST /v1/images/registries).
TemplateBuild ReadTemplateBuild(const nlohmann::json& body);

// The kiln build of `build` (the rest of the ImageRequest comes from the
// reservation): its Dockerfile, the archives its COPY steps read (named
// contexts, by hash), which E2B step each kiln step was made from, and the
// first step the cache may not answer. `piece(hash)` is the key's uploaded
// archive of that hash, if any. kInvalidRequest naming the step
// ("body.steps[3]: ...") for what kiln cannot build, or an archive the key
// never uploaded.
struct KilnTemplateBuild {
  std::string dockerfile;
  std::map<std::string, Sha256Digest> contexts;
  std::vector<std::string>
      step_names;  // by kiln step number - 1: "base", "1", "2", ..., "finalize"
  std::optional<int> rebuild_from_step;
  bool cache = true;
  std::optional<images::StartSpec> start;
};
Result<KilnTemplateBuild> TemplateDockerfile(
    const TemplateBuild& build,
    const std::function<std::optional<Sha256Digest>(const std::string& hash)>& piece);

// E2B's build status (TemplateBuildInfo) of image `record`, with the log
// entries `page` holds (from entry logsOffset on).
nlohmann::json BuildStatusJson(const images::ImageRecord& record, const images::LogPage& page);
// One build of a template (TemplateBuild, in GET /templates/{id}).
nlohmann::json TemplateBuildJson(const images::ImageRecord& record);
// The status of a build requested and not started yet.
nlohmann::json WaitingStatusJson(const std::string& template_id, const std::string& build_id);
// One BuildLogEntry of a kiln log line.
nlohmann::json LogEntryJson(const images::LogLine& line,
                            const std::vector<std::string>& step_names);
// The E2B step a kiln step number was made from ("base" when unknown).
std::string E2bStepOf(int kiln_step, const std::vector<std::string>& step_names);

// The caller's own versions of template `name` (an admin key's too: E2B
// has no admin), newest first, with the tags on each.
std::vector<images::ImageRecord> TemplateVersions(ApiContext& ctx, const Exchange& ex,
                                                  const std::string& name);

// Routes: builds, their files and statuses, tags (routes_template_builds.cc).
void AddTemplateBuildRoutes(Router& r, ApiContext& ctx);

}  // namespace kiln::api::e2b
