#include "common/path_ids.h"

#include "common/digest.h"

namespace kiln {

bool IsLowerHex(std::string_view s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::optional<Sha256Digest> Sha256Digest::Parse(std::string_view text) {
  constexpr std::string_view kPrefix = "sha256:";
  if (!text.starts_with(kPrefix)) return std::nullopt;
  return FromHex(text.substr(kPrefix.size()));
}

std::optional<Sha256Digest> Sha256Digest::FromHex(std::string_view hex) {
  if (!IsLowerHex(hex, 64)) return std::nullopt;
  return Sha256Digest(std::string(hex));
}

Sha256Digest Sha256Digest::Of(std::string_view data) { return Sha256Digest(Sha256Hex(data)); }

std::optional<Uuid> Uuid::Parse(std::string_view text) {
  if (text.size() != 36) return std::nullopt;
  for (size_t i = 0; i < text.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? text[i] != '-' : !IsLowerHex(text.substr(i, 1), 1)) return std::nullopt;
  }
  return Uuid(std::string(text));
}

std::optional<LayerId> LayerId::Parse(std::string_view text) {
  if (IsLowerHex(text, 64)) return LayerId(std::string(text));
  constexpr std::string_view kBase = "base-";
  if (text.starts_with(kBase) && IsLowerHex(text.substr(kBase.size()), 16))
    return LayerId(std::string(text));
  return std::nullopt;
}

}  // namespace kiln
