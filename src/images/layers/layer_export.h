// A stored layer written back out as a tar, byte for byte the same every
// time: what a snapshot's export sends for each image layer it needs
// (store/snapshot_transfer.h).
//
// The layer directory is what UnpackLayer made (layer_unpack.h): files with
// their owners, modes, mtimes and xattrs, symlinks, fifos, hard links within
// the layer and OCI whiteouts as `.wh.` files. The tar lists it in a fixed
// order (each directory's entries sorted by name, a directory before what it
// holds) with only those fields set, as pax (libarchive's restricted pax:
// ustar headers, an extended header only for long names, large values and
// xattrs), so writing it twice gives the same bytes and the same sha256,
// and UnpackLayer reads it back into the same directory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kiln::images {

struct LayerTarDigest {
  std::string sha256;  // lowercase hex of the tar's bytes
  uint64_t size = 0;   // its length
};

// Writes the tar of the layer directory `dir` to `write` (false from it stops
// the writing: kIoError). A file that cannot be read is kIoError naming it.
Status WriteLayerTar(const std::string& dir, const std::function<bool(std::string_view)>& write);

// The sha256 and length of WriteLayerTar's output, without keeping it.
Result<LayerTarDigest> DigestLayerTar(const std::string& dir);

}  // namespace kiln::images
