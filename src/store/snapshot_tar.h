// The tar a snapshot travels in (GET /v1/snapshots/{id}/archive, POST
// /v1/snapshots:import): plain ustar, regular files only.
//
// The writer is kiln's own: the export must state the tar's exact length
// before its first byte (x-content-length), and a ustar header of a regular
// file is one 512-byte block whose every field kiln sets, so the length is
// plain arithmetic. The reader is libarchive's tar reader (tar only: no
// compression filter, no other format), the same library that reads every
// other tar kiln takes in: a parser of untrusted bytes is not hand-written.
// It pulls the request body chunk by chunk (a snapshot is 100 MiB and more;
// it is never held whole), and every way a body can be wrong -- not a tar,
// cut short, a link, a device, a path leaving the snapshot -- is a Status
// naming the entry, before any byte of that entry is written anywhere.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kiln::store {

inline constexpr size_t kTarBlock = 512;

// The header of a regular file entry (mode 0644, owner 0); `name` must be a
// relative path under 100 bytes. Sizes past ustar's 8 GiB use GNU base-256.
std::string TarFileHeader(std::string_view name, uint64_t size, int64_t mtime_s);
// Zeros from the end of `size` bytes of data to the next block.
std::string TarPadding(uint64_t size);
// The end-of-archive marker: two zero blocks.
std::string TarEnd();

// Puts the next piece of the body in *chunk; false once the body ended. It
// may throw (a body over the server's cap): ReadTar passes that on.
using TarSource = std::function<bool(std::string* chunk)>;

// What ReadTar found, one entry at a time.
class TarSink {
 public:
  virtual ~TarSink() = default;
  // A regular file entry begins; `name` is cleaned (no "./", no "..", not
  // absolute). An error stops the reader.
  virtual Status BeginEntry(const std::string& name, uint64_t size) = 0;
  // Its data, in order, in pieces of any size.
  virtual Status EntryData(std::string_view data) = 0;
  // All of its `size` bytes were given.
  virtual Status EndEntry() = 0;
};

// Reads a whole tar from `source` into `sink`. OK only when the tar ended
// with its end-of-archive marker and nothing but zeros (record padding)
// followed. Errors are kInvalidArchive naming the entry or the byte, or the
// sink's own Status; reading stops at the first.
Status ReadTar(const TarSource& source, TarSink& sink);

}  // namespace kiln::store
