// Identifiers handed to clients.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

// A random UUID (version 4), e.g. for sandbox ids.
std::string NewUuid();
// A random 64-bit number (nonces).
uint64_t RandomU64();

}  // namespace kiln
