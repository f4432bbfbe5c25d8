// An operator's name for registries kilnd may pull from directly
// (--allow-registry): a host, which matches it on any port, or host:port
// ([v6]:port for an IPv6 address), which matches only references that name
// that port. Parsed at start, so a spelling that would match nothing is
// refused there, naming the flag, instead of silently allowing nothing.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "images/parse/image_ref.h"

namespace kiln::images {

struct RegistryPattern {
  std::string host;         // lower case, v6 without brackets
  std::optional<int> port;  // nullopt: any port
  bool Matches(const ImageRef& ref) const;
};

// kInvalidRequest naming what is wrong with `text`.
Result<RegistryPattern> ParseRegistryPattern(std::string_view text);

}  // namespace kiln::images
