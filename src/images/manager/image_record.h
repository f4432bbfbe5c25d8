// An image's durable state: what was asked for (source, reference, start
// command, build limits, labels), where its build is (ImageState) and what
// it made (layers, config, user, warm copy). store::ImageCatalog keeps it
// as JSON (to_json/from_json below; the key names are the stored format,
// read back by a restarted kilnd); api/kiln/presenters.cc renders it as
// ImageInfo. The parts the API also shows (`config`, `start`, `build`) are
// stored in the API's own spelling (ConfigJson, StartJson, BuildJson).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/path_ids.h"
#include "common/run_as.h"
#include "images/layers/oci_layout.h"
#include "images/manager/image_request.h"

namespace kiln::images {

// queued -> building -> ready | failed. A delete during the build goes
// through deleting (the build stops at its next step) to deleted; a
// delete of an ended build goes straight to deleted. A kilnd that stops
// mid-build marks queued and building ones failed (build_interrupted) and
// deleting ones deleted when it starts again.
enum class ImageState { kQueued, kBuilding, kReady, kFailed, kDeleting, kDeleted };

// The API's spelling ("ready"), and back; nullopt for anything else.
std::string_view ImageStateName(ImageState state);
std::optional<ImageState> ParseImageState(std::string_view name);

// `source` ("dockerfile", ...), and back; nullopt for anything else.
std::string_view SourceName(ImageSource source);
std::optional<ImageSource> ParseImageSource(std::string_view name);

// The API's `config`, `start` and `build` of an image, and back. The
// readers take what the writers wrote; missing keys keep the defaults.
nlohmann::json ConfigJson(const OciConfig& config);
OciConfig ConfigFromJson(const nlohmann::json& j);
nlohmann::json StartJson(const StartSpec& start);
StartSpec StartFromJson(const nlohmann::json& j);
nlohmann::json BuildJson(const BuildLimits& build);
BuildLimits BuildFromJson(const nlohmann::json& j);

struct ImageRecord {
  std::string id;
  std::string owner;  // the API key that built it; "" = the built-in image
  std::string name;   // an unnamed image's is its id
  // The catalog's: the n-th build of `name` by `owner`, and the tags that
  // point at it (sorted; read with the record, never stored in it).
  int64_t version = 0;
  std::vector<std::string> tags;
  ImageState state = ImageState::kQueued;
  ImageSource source = ImageSource::kDockerfile;
  std::optional<std::string> ref;  // a pull's reference (ImageRef::String)
  // What the build asked for: the start command (unset: none, or the
  // Dockerfile's own CMD/ENTRYPOINT once built), the build's sandbox
  // limits (unset for the built-in image), labels, whether its sandboxes
  // keep the sudo shim, and the tags it takes when ready.
  std::optional<StartSpec> start;
  std::optional<BuildLimits> build;
  std::optional<Shape> shape;  // ImageRequest::shape
  std::map<std::string, std::string> labels;
  bool sudo = true;
  std::vector<std::string> pending_tags;
  // ImageRequest::step_names: the requester's name for each kiln step.
  std::vector<std::string> step_names;
  // What the build made. `layers` and `chain_id` (the root's name, hex)
  // are set together: chain_id empty = not built yet.
  std::vector<LayerId> layers;  // bottom to top
  std::string chain_id;
  std::optional<std::string> digest;  // a pull's manifest digest, else of chain and config
  std::optional<OciConfig> config;
  std::optional<RunAs> run_as;  // who its sandboxes run as
  uint64_t size_bytes = 0;
  int steps_total = 0, steps_cached = 0;
  std::optional<int> steps_run;  // unset until built (and for the built-in image)
  // Why it failed: {code, message, ...the failure's details, logTail}; null
  // while it has not.
  nlohmann::json error;
  // The warm copy (a snapshot) and its start's {state, processId, readyMs,
  // snapshotBytes}, as the create that restores it answers them; null
  // while there is none.
  std::optional<std::string> warm_snapshot;
  nlohmann::json warm;
  int64_t created_ms = 0;
  int64_t started_ms = 0;  // 0 until its build started
  int64_t ready_ms = 0;    // 0 until ready
  int64_t ended_ms = 0;    // 0 until ready, failed or deleted
};

void to_json(nlohmann::json& j, const ImageRecord& r);
// Throws nlohmann::json::exception on a record without an id or with a
// layer that is not a layer id; other missing keys take the defaults.
void from_json(const nlohmann::json& j, ImageRecord& r);

}  // namespace kiln::images
