// Recipes: the simple way to describe an image (packages, files, commands) as
// JSON, turned into a Dockerfile so that recipes and Dockerfiles share one
// builder, one cache and one set of rules.
//
//   {base?: string (default "base"), apt?: [pkg], pip?: [pkg], npm?: [pkg],
//    commands?: [string],
//    files?: [{path, content, encoding?: "utf8"|"base64" (default utf8),
//              mode?: int or octal string like "0755" (default 0644)}],
//    env?: {k: v}, workdir?: string}
//
// The generated Dockerfile is, in this order: FROM <base>; USER root; one RUN
// for apt, one for pip, one for npm (each only when the list is non-empty);
// COPY --chmod=<mode> per file; one RUN per command; ENV for env; WORKDIR for
// workdir. Commands therefore run as root, from the base image's WORKDIR, and
// do not see `env`. There is no final USER: the builder gives a recipe image
// its base image's user again after the last step, so that `USER root` (needed
// to install packages) does not leak into the image.
//
// Nothing the user gives reaches a shell unquoted: package names are checked
// against a strict alphabet and single-quoted; commands are given to
// /bin/sh -c in JSON exec form (so a newline or a trailing backslash in one
// cannot change the Dockerfile's structure); file paths, env values and the
// workdir are escaped for the Dockerfile's own variable expansion.
//
// Pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace kiln::images {

struct RecipeFile {
  std::string context_path;  // "recipe-files/0", ... in the build context
  std::string bytes;         // decoded content
  uint32_t mode = 0644;
};
struct RecipeBuild {
  std::string dockerfile;  // Dockerfile text equivalent to the recipe
  // Files the Dockerfile COPYs, at context_path ("recipe-files/0", ...).
  std::vector<RecipeFile> context;
};

inline constexpr size_t kMaxRecipeFiles = 256;
inline constexpr size_t kMaxRecipeFileBytes = 1024 * 1024;  // all files' content together

// kInvalidRequest naming the field path ("recipe.apt[2]: ...", details {"field": path}).
// Package names must match [A-Za-z0-9][A-Za-z0-9.+_:=<>~!,\[\]-]* (no spaces or shell
// metacharacters); file paths absolute, no ".."; at most 256 files and 1 MiB of file content
// in all (kPayloadTooLarge). The base must be a kiln image name or an OCI reference.
Result<RecipeBuild> RecipeToBuild(const nlohmann::json& recipe);

// A Dockerfile build's inline `files` ([{path, content, encoding?, mode?}],
// paths relative to the build context), under the same bounds as a
// recipe's; context_path is the file's path. Errors name "files[i]...".
Result<std::vector<RecipeFile>> InlineContextFiles(const nlohmann::json& files);

}  // namespace kiln::images
