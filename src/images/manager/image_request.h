// What a client asks to build (POST /v1/images), once the API has checked
// every field: a typed request the image manager can trust.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/path_ids.h"
#include "common/shape.h"
#include "images/parse/image_ref.h"
#include "images/parse/recipe.h"
#include "network/policy.h"

namespace kiln::images {

// The build's sandbox shape and bounds (the reference's `build`).
struct BuildLimits {
  int vcpu = 2;
  int memory_mib = 4096;
  int disk_mib = 4096;         // each step's scratch disk
  int max_image_mib = 8192;    // the image's own bytes
  int timeout_seconds = 1800;  // the whole build
};

// A command started when the image is booted, and how to tell it is ready.
struct StartSpec {
  std::optional<std::vector<std::string>> argv;
  std::optional<std::string> command;
  std::optional<std::string> cwd;
  std::map<std::string, std::string> env;
  std::optional<std::string> ready_command;
  std::optional<int> ready_port;
  int ready_timeout_seconds = 60;
};

enum class ImageSource { kRecipe, kDockerfile, kImage, kBuiltin };

struct ImageRequest {
  // The id the image takes: kiln makes one unless a staged build reserved
  // it before its steps arrived (staged_builds.h).
  std::optional<Uuid> id;
  std::string owner;
  std::string name;
  std::vector<std::string> tags;  // empty = {"latest"}
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> env;  // over the image's ENV
  ImageSource source = ImageSource::kDockerfile;
  nlohmann::json recipe;                // kRecipe
  std::string dockerfile;               // kDockerfile
  std::optional<Sha256Digest> context;  // an uploaded context of the requester's
  // Or inline files, the whole context (paths relative to it); not with `context`.
  std::vector<RecipeFile> files;
  std::map<std::string, std::string> build_args;
  std::optional<std::string> target;
  std::optional<std::string> dockerignore;
  // Named build contexts, as BuildKit's --build-context: `COPY --from=NAME`
  // reads the context of the requester's uploaded NAME instead of an image
  // or stage (names: [a-z0-9][a-z0-9._-]*, 1-64 chars).
  std::map<std::string, Sha256Digest> named_contexts;
  // The steps from this one (the Dockerfile's first FROM is step 1) run
  // again though the cache has them: a client's "skip the cache from here".
  std::optional<int> rebuild_from_step;
  // What the requester calls each step, by kiln step number - 1 (a vendor's
  // template step it was made from); shown beside the image and in its
  // failure. Empty: the requester sent the Dockerfile itself.
  std::vector<std::string> step_names;
  std::optional<ImageRef> image_ref;  // kImage: parsed once, at the edge
  BuildLimits build;
  // Its sandboxes' shape where a create names none, and its warm copy's
  // (unset: kilnd's default shape). A vendor's template carries one.
  std::optional<Shape> shape;
  std::optional<StartSpec> start;
  bool cache = true;
  network::Policy network;  // what RUN steps may reach (default: nothing)
  bool sudo = true;         // false: its sandboxes run with the sudo shim off
};

}  // namespace kiln::images
