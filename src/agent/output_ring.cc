#include "agent/output_ring.h"

#include <algorithm>

namespace kiln::agent {

void OutputRing::Append(uint8_t channel, std::string_view data) {
  if (data.empty()) return;
  if (!chunks_.empty() && chunks_.back().channel == channel && chunks_.back().data.size() < 16384) {
    chunks_.back().data.append(data);
  } else {
    chunks_.push_back(Chunk{end_offset_, channel, std::string(data)});
  }
  size_ += data.size();
  end_offset_ += data.size();
  while (size_ > capacity_) {
    Chunk& front = chunks_.front();
    size_t excess = size_ - capacity_;
    if (front.data.size() <= excess) {
      size_ -= front.data.size();
      chunks_.pop_front();
    } else {
      front.data.erase(0, excess);
      front.offset += excess;
      size_ -= excess;
    }
  }
  first_offset_ = chunks_.empty() ? end_offset_ : chunks_.front().offset;
}

std::vector<OutputRing::Chunk> OutputRing::Read(uint64_t cursor, size_t max_bytes,
                                                uint64_t* dropped) const {
  *dropped = cursor < first_offset_ ? first_offset_ - cursor : 0;
  std::vector<Chunk> out;
  size_t total = 0;
  for (const auto& c : chunks_) {
    uint64_t end = c.offset + c.data.size();
    if (end <= cursor) continue;
    size_t skip = cursor > c.offset ? static_cast<size_t>(cursor - c.offset) : 0;
    size_t take = std::min(c.data.size() - skip, max_bytes - total);
    if (take == 0) break;
    out.push_back(Chunk{c.offset + skip, c.channel, c.data.substr(skip, take)});
    total += take;
  }
  return out;
}

}  // namespace kiln::agent
