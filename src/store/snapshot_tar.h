// The tar a snapshot travels in (GET /v1/snapshots/{id}/archive, POST
// /v1/snapshots:import): plain ustar, regular files only.
//
// kiln writes this tar itself and reads nothing else, so the reader is a
// strict push parser rather than libarchive: it is fed the request body as
// it arrives (a snapshot is 100 MiB and more; it is never held whole), and
// every way a body can be wrong -- not a tar, cut short, a link, a device,
// a path leaving the snapshot -- is a Status naming the entry, before any
// byte of that entry is written anywhere.
#pragma once

#include <cstdint>
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

// What a TarReader found, one entry at a time.
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

// Parses a tar fed in arbitrary pieces. Errors are kInvalidArchive with the
// entry's name (or the sink's own Status); after one, Feed refuses more.
class TarReader {
 public:
  explicit TarReader(TarSink& sink) : sink_(sink) {}

  Status Feed(std::string_view data);
  // The body ended: OK only after the end-of-archive marker.
  Status Finish();
  // Bytes taken so far.
  uint64_t offset() const { return offset_; }

 private:
  Status Header(const char* block);
  Status Fail(Status s);

  enum class State { kHeader, kData, kPadding, kEnd, kFailed };
  TarSink& sink_;
  State state_ = State::kHeader;
  std::string block_;  // a header being assembled
  std::string entry_;  // the current entry's name
  uint64_t remaining_ = 0;
  int zero_blocks_ = 0;
  uint64_t offset_ = 0;
  int entries_ = 0;
  Status failed_;
};

}  // namespace kiln::store
