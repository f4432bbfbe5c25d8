// The latest output of a background process: a byte ring addressed by
// absolute offsets in the combined stdout+stderr stream, so readers resume
// with a cursor and learn exactly how much they missed.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::agent {

class OutputRing {
 public:
  struct Chunk {
    uint64_t offset;
    uint8_t channel;  // 1 stdout, 2 stderr
    std::string data;
  };

  explicit OutputRing(size_t capacity) : capacity_(capacity) {}

  void Append(uint8_t channel, std::string_view data);

  // Chunks at or after `cursor`, at most `max_bytes` in total. Bytes before
  // first_offset() are gone; *dropped says how many of them the reader missed.
  std::vector<Chunk> Read(uint64_t cursor, size_t max_bytes, uint64_t* dropped) const;

  uint64_t first_offset() const { return first_offset_; }
  uint64_t end_offset() const { return end_offset_; }

 private:
  size_t capacity_;
  std::deque<Chunk> chunks_;
  size_t size_ = 0;
  uint64_t first_offset_ = 0;
  uint64_t end_offset_ = 0;
};

}  // namespace kiln::agent
