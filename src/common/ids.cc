#include "common/ids.h"

#include <sys/random.h>

#include <cstdio>
#include <stdexcept>

namespace kiln {

// From the kernel's CSPRNG: ids and session nonces must not be guessable.
uint64_t RandomU64() {
  uint64_t v;
  if (getrandom(&v, sizeof v, 0) != sizeof v) throw std::runtime_error("getrandom failed");
  return v;
}

std::string NewUuid() {
  uint64_t hi = RandomU64(), lo = RandomU64();
  hi = (hi & ~0xf000ull) | 0x4000ull;        // version 4
  lo = (lo & ~(3ull << 62)) | (2ull << 62);  // RFC 4122 variant
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08llx-%04llx-%04llx-%04llx-%012llx",
                static_cast<unsigned long long>(hi >> 32),
                static_cast<unsigned long long>((hi >> 16) & 0xffff),
                static_cast<unsigned long long>(hi & 0xffff),
                static_cast<unsigned long long>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xffffffffffffull));
  return buf;
}

}  // namespace kiln
