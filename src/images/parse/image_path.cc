#include "images/parse/image_path.h"

namespace kiln::images {
namespace {

// The non-empty components of `path`, "." and ".." included.
std::vector<std::string_view> PathComponents(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

}  // namespace

std::string CleanPath(std::string_view path) {
  std::vector<std::string_view> out;
  for (std::string_view part : PathComponents(path)) {
    if (part == ".") continue;
    if (part == "..") {
      if (!out.empty()) out.pop_back();
      continue;
    }
    out.push_back(part);
  }
  std::string clean;
  for (std::string_view part : out) {
    clean += '/';
    clean += part;
  }
  return clean.empty() ? "/" : clean;
}

bool EscapesRoot(std::string_view path) {
  int depth = 0;
  for (std::string_view part : PathComponents(path)) {
    if (part == ".") continue;
    if (part == "..") {
      if (--depth < 0) return true;
    } else {
      ++depth;
    }
  }
  return false;
}

std::vector<std::string> PathParts(std::string_view path) {
  std::string clean = CleanPath(path);
  std::vector<std::string> out;
  size_t i = 1;  // `clean` starts with "/"
  while (i < clean.size()) {
    size_t j = clean.find('/', i);
    if (j == std::string::npos) j = clean.size();
    out.push_back(clean.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

}  // namespace kiln::images
