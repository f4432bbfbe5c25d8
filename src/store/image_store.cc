#include "store/image_store.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "common/digest.h"
#include "common/log.h"
#include "common/subprocess.h"

namespace kiln::store {
namespace fs = std::filesystem;

std::string BaseImageName(const std::string& recipe_path) {
  std::ifstream f(recipe_path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read the image recipe " + recipe_path);
  std::string text((std::istreambuf_iterator<char>(f)), {});
  return "base-" + Sha256Hex(text).substr(0, 16);
}

std::string EnsureBaseImage(const std::string& image_dir, const std::string& recipe_path) {
  std::string root = image_dir + "/" + BaseImageName(recipe_path);
  if (fs::exists(root + "/usr/bin/python3")) return root;
  fs::create_directories(image_dir);
  LogInfo("building the base image", {{"path", root}});
  ProcessOutput r = RunProcess({"bash", recipe_path, root}, 30 * 60 * 1000);
  if (!r.ok()) throw std::runtime_error("building the base image failed: " + r.Describe());
  return root;
}

}  // namespace kiln::store
