// Fuzzes kiln's tar reader and writer (src/images): an input is a tar
// (plain or compressed) as a client uploads it for a build context or an
// image layer. It is unpacked as a context, then packed again and unpacked
// again (the two trees must agree), and unpacked as a layer. Beside the
// destination lies a marker directory: no entry may ever write, replace or
// remove anything outside the destination, whatever its links say.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "cli/image_context.h"
#include "fuzz_util.h"
#include "images/context/build_context.h"
#include "images/layers/layer_unpack.h"

namespace kiln::fuzz {
namespace {

namespace fs = std::filesystem;

// path -> "type:content-or-target", for comparing two unpacked trees.
std::map<std::string, std::string> Tree(const std::string& root) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    std::string rel = fs::relative(it->path(), root, ec).string();
    auto st = it->symlink_status(ec);
    if (fs::is_symlink(st)) {
      out[rel] = "l:" + fs::read_symlink(it->path(), ec).string();
    } else if (fs::is_directory(st)) {
      out[rel] = "d";
    } else if (fs::is_regular_file(st)) {
      std::ifstream f(it->path(), std::ios::binary);
      out[rel] = "f:" + std::string(std::istreambuf_iterator<char>(f), {});
    }
  }
  return out;
}

struct Dirs {
  TempDir base;
  std::string input = base.path() + "/input.tar";
  std::string repacked = base.path() + "/repacked.tar";
  std::string first = base.path() + "/first";
  std::string second = base.path() + "/second";
  std::string layer = base.path() + "/layer";
  std::string outside = base.path() + "/outside";
  std::string marker = outside + "/marker";

  Dirs() {
    fs::create_directories(outside);
    std::ofstream(marker) << "kiln";
  }
  void Clear() {
    std::error_code ec;
    for (const auto& d : {first, second, layer}) fs::remove_all(d, ec);
    fs::remove(repacked, ec);
  }
  // Only our own files may be here, and the marker untouched.
  void CheckOutside() const {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(base.path(), ec)) {
      std::string name = e.path().filename().string();
      if (name != "input.tar" && name != "repacked.tar" && name != "first" && name != "second" &&
          name != "layer" && name != "outside")
        __builtin_trap();
    }
    std::ifstream f(marker);
    std::string text((std::istreambuf_iterator<char>(f)), {});
    if (text != "kiln" || fs::is_symlink(marker)) __builtin_trap();
    if (std::distance(fs::directory_iterator(outside), fs::directory_iterator()) != 1)
      __builtin_trap();
  }
};

}  // namespace
}  // namespace kiln::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  static auto* dirs = new fuzz::Dirs();
  dirs->Clear();
  {
    std::ofstream f(dirs->input, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  images::ContextLimits limits;
  limits.max_files = 200;
  limits.max_unpacked = 4 << 20;  // keeps each input fast; the limits path is fuzzed too
  auto first = images::UnpackContext(dirs->input, dirs->first, limits, nullptr);
  dirs->CheckOutside();
  if (first.ok()) {
    // Packed as clients pack it (the CLI's packer; "" leaves nothing out). A
    // name ustar cannot hold is refused by name (kInvalidRequest), not a bug;
    // any other failure is.
    auto packed = cli::PackContext(dirs->first, std::string());
    if (!packed.ok()) {
      if (packed.status().code() != Code::kInvalidRequest) __builtin_trap();
      return 0;
    }
    {
      std::ofstream f(dirs->repacked, std::ios::binary | std::ios::trunc);
      f.write(packed->bytes.data(), static_cast<std::streamsize>(packed->bytes.size()));
    }
    auto second = images::UnpackContext(dirs->repacked, dirs->second, limits, nullptr);
    if (!second.ok()) __builtin_trap();
    if (fuzz::Tree(dirs->first) != fuzz::Tree(dirs->second)) __builtin_trap();
    dirs->CheckOutside();
  }
  images::UnpackOptions layer;
  layer.max_bytes = 4 << 20;
  layer.skip_prefixes = {"opt/kiln"};
  static_cast<void>(images::UnpackLayer(dirs->input, dirs->layer, layer));
  dirs->CheckOutside();
  return 0;
}
