// Fuzzes the ids that become host paths (common/path_ids.h): a digest from
// a registry's manifest, a layer id from an image record or an imported
// archive, a sandbox or snapshot id. Checks each Parse's promise, not just
// that it returns: whatever it accepts is its own grammar, spelled back
// exactly, and safe as one path component (no '/', no "..", not empty).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/path_ids.h"
#include "fuzz_util.h"

namespace {

bool OnlyIdChars(std::string_view s) {
  for (char c : s) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-';
    if (!ok) return false;
  }
  return true;
}

// Traps unless `component` is a single, plain path component (lowercase
// letters, digits and '-': hex, and "base-").
void CheckComponent(std::string_view component) {
  if (component.empty() || component.size() > 80) __builtin_trap();
  if (component.find('/') != std::string_view::npos) __builtin_trap();
  if (component == "." || component == "..") __builtin_trap();
  if (!OnlyIdChars(component)) __builtin_trap();
}

void CheckOne(std::string_view text) {
  using namespace kiln;
  if (auto d = Sha256Digest::Parse(text)) {
    if (d->str() != text || d->hex().size() != 64) __builtin_trap();
    CheckComponent(d->hex());
    if (!(Sha256Digest::FromHex(d->hex()) == d)) __builtin_trap();
  }
  if (auto d = Sha256Digest::FromHex(text)) {
    if (d->hex() != text) __builtin_trap();
    CheckComponent(d->hex());
  }
  if (auto u = Uuid::Parse(text)) {
    if (u->str() != text || u->str().size() != 36) __builtin_trap();
    CheckComponent(u->str());
  }
  if (auto l = LayerId::Parse(text)) {
    if (l->str() != text) __builtin_trap();
    CheckComponent(l->str());
    bool base = text.size() == 21 && text.starts_with("base-");
    if (l->builtin() != base) __builtin_trap();
    if (!base && !IsLowerHex(text, 64)) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input = kiln::fuzz::AsText(data, size);
  // Each line is one candidate, so one input tries many near misses.
  for (const std::string& line : kiln::fuzz::SplitParts(input, "\n")) CheckOne(line);
  return 0;
}
