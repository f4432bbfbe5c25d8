// Digests as lowercase hex.
//
// SHA-256 (OpenSSL) where a cryptographic hash matters: API key secrets,
// idempotency keys, file downloads' `x-content-sha256`. XXH3-128 (Debian's
// libxxhash) for catching corruption of large local files (snapshot pages),
// not for authenticity: it runs at memory speed where SHA-256 managed
// ~1.5 GB/s, and a snapshot is hashed on every capture and checked on every
// restore.
#pragma once

#include <string>
#include <string_view>

namespace kiln {

std::string Sha256Hex(std::string_view data);
// The digest of a file's contents, read in 1 MiB blocks; "" if unreadable.
std::string FileSha256Hex(const std::string& path);
std::string FileXxh3Hex(const std::string& path);

}  // namespace kiln
