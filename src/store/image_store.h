// Root filesystems on disk. The base image is built by a recipe script
// (images/base/build.sh) into <image dir>/base-<sha256 of the recipe>, so a
// changed recipe makes a new image and an existing one is never modified.
#pragma once

#include <string>

namespace kiln::store {

// The directory name of the base image for this recipe ("base-<16 hex>").
std::string BaseImageName(const std::string& recipe_path);

// Returns the base image's root, building it first if missing. Throws
// std::runtime_error with the builder's output if the build fails.
std::string EnsureBaseImage(const std::string& image_dir, const std::string& recipe_path);

}  // namespace kiln::store
