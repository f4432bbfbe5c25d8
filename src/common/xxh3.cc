#include "common/xxh3.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <memory>
#include <vector>

#include "common/unique_fd.h"

namespace kiln {

std::string FileXxh3Hex(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return "";
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                 XXH3_freeState);
  if (!state || XXH3_128bits_reset(state.get()) != XXH_OK) return "";
  std::vector<char> buf(1 << 20);
  ssize_t n;
  while ((n = ::read(fd.get(), buf.data(), buf.size())) > 0)
    XXH3_128bits_update(state.get(), buf.data(), static_cast<size_t>(n));
  if (n < 0) return "";
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(state.get()));
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : canon.digest) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

}  // namespace kiln
