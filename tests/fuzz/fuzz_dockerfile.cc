// Fuzzes the image build's text inputs (src/images): a Dockerfile (parsed
// with its variables expanded, then the stages a build would need), a
// .dockerignore, and image references as users write them in FROM and in
// the API. The first line of an input is its build args as KEY=VALUE;...
// the rest the text.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "images/context/dockerignore.h"
#include "images/parse/dockerfile.h"
#include "images/parse/image_ref.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  std::string_view input = fuzz::AsText(data, size);
  size_t eol = input.find('\n');
  std::string_view args_line = input.substr(0, eol);
  std::string_view text = eol == std::string_view::npos ? "" : input.substr(eol + 1);

  std::map<std::string, std::string> args;
  for (const auto& pair : fuzz::SplitParts(args_line, ";")) {
    size_t eq = pair.find('=');
    if (eq != std::string::npos) args[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  images::DockerfileLimits limits;
  limits.max_bytes = 64 * 1024;
  auto file = images::ParseDockerfile(text, args, limits);
  if (file.ok()) {
    static_cast<void>(images::StagesFor(*file, std::nullopt));
    for (const auto& stage : file->stages) {
      if (stage.name) static_cast<void>(images::StagesFor(*file, stage.name));
      // A FROM names an earlier stage, a kiln image or an OCI reference.
      if (!stage.base_stage) {
        static_cast<void>(images::ParseKilnImageRef(stage.base));
        auto ref = images::ParseImageRef(stage.base);
        // The canonical form is the store's key: it must read back to
        // itself ("rom" and "rom:latest" are one image, one key).
        if (ref.ok()) {
          auto again = images::ParseImageRef(ref->String());
          if (!again.ok() || again->String() != ref->String()) __builtin_trap();
        }
      }
    }
  }
  static_cast<void>(images::DockerIgnore::Parse(text));
  if (auto ignore = images::DockerIgnore::Parse(args_line); ignore.ok()) {
    for (const auto& line : fuzz::SplitParts(text.substr(0, 4096), "\n"))
      static_cast<void>(ignore->Excluded(line));
  }
  static_cast<void>(images::ParseImageRef(args_line));
  static_cast<void>(images::ParseKilnImageRef(args_line));
  return 0;
}
