#include "store/image_store.h"

#include <openssl/sha.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "common/log.h"
#include "common/subprocess.h"

namespace kiln::store {
namespace fs = std::filesystem;

std::string BaseImageName(const std::string& recipe_path) {
  std::ifstream f(recipe_path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read the image recipe " + recipe_path);
  std::string text((std::istreambuf_iterator<char>(f)), {});
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), md);
  static const char* hex = "0123456789abcdef";
  std::string name = "base-";
  for (int i = 0; i < 8; ++i) {
    name += hex[md[i] >> 4];
    name += hex[md[i] & 15];
  }
  return name;
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
