// Paths inside an image, cleaned by their text alone: what a Dockerfile's
// WORKDIR, a COPY's sources and destination, and the entries of a build
// context name. Nothing here reads the file system (for that, OpenInRoot in
// images/context/safe_path.h resolves symlinks inside the image); it is
// here, below the context and manager libraries, so that the Dockerfile
// parser and they clean paths the same way. Pure and thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::images {

// Cleans an in-image path lexically: "a/./b/../c" -> "/a/c"; ".." above the
// root stays at "/"; the result is always absolute, without a trailing "/".
std::string CleanPath(std::string_view path);

// The components of CleanPath(path): "/a/./b/" -> {"a", "b"}; "/" -> {}.
std::vector<std::string> PathParts(std::string_view path);

// True if `path`, read relative to a root, climbs above it ("../x",
// "a/../../x"), which CleanPath would silently clamp.
bool EscapesRoot(std::string_view path);

}  // namespace kiln::images
