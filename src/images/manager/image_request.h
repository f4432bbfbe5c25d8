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
  std::optional<ImageRef> image_ref;  // kImage: parsed once, at the edge
  BuildLimits build;
  std::optional<StartSpec> start;
  bool cache = true;
  network::Policy network;  // what RUN steps may reach (default: nothing)
  bool sudo = true;         // false: its sandboxes run with the sudo shim off
};

}  // namespace kiln::images
