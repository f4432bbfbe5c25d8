// XXH3-128 checksums as lowercase hex (Debian's libxxhash underneath).
//
// For catching corruption of large local files (snapshot pages), not for
// authenticity: it runs at memory speed where SHA-256 managed ~1.5 GB/s, and
// a snapshot is hashed on every capture and checked on every restore.
#pragma once

#include <string>

namespace kiln {

// The checksum of a file's contents, read in 1 MiB blocks; "" if unreadable.
std::string FileXxh3Hex(const std::string& path);

}  // namespace kiln
