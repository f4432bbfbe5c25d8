// SHA-256 digests as lowercase hex (OpenSSL underneath).
#pragma once

#include <string>
#include <string_view>

namespace kiln {

std::string Sha256Hex(std::string_view data);
// The digest of a file's contents, read in 1 MiB blocks; "" if unreadable.
std::string FileSha256Hex(const std::string& path);

}  // namespace kiln
