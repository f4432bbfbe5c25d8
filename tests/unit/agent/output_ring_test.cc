// Background-process output ring of the agent (src/agent/output_ring.h):
// absolute offsets, trimming at capacity, cursors and the dropped count.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "agent/output_ring.h"

namespace kiln::agent {
namespace output_ring_test {
namespace {

constexpr uint8_t kOut = 1;
constexpr uint8_t kErr = 2;

std::vector<OutputRing::Chunk> ReadAll(const OutputRing& r, uint64_t cursor, uint64_t* dropped,
                                       size_t max_bytes = SIZE_MAX) {
  return r.Read(cursor, max_bytes, dropped);
}

std::string Join(const std::vector<OutputRing::Chunk>& chunks) {
  std::string s;
  for (const auto& c : chunks) s += c.data;
  return s;
}

// Chunks must be contiguous: each starts where the previous one ended.
void ExpectContiguous(const std::vector<OutputRing::Chunk>& chunks) {
  for (size_t i = 1; i < chunks.size(); ++i)
    EXPECT_EQ(chunks[i].offset, chunks[i - 1].offset + chunks[i - 1].data.size()) << "chunk " << i;
}

TEST(OutputRingTest, EmptyRing) {
  OutputRing r(100);
  EXPECT_EQ(r.first_offset(), 0u);
  EXPECT_EQ(r.end_offset(), 0u);
  uint64_t dropped = 99;
  EXPECT_TRUE(ReadAll(r, 0, &dropped).empty());
  EXPECT_EQ(dropped, 0u);
}

TEST(OutputRingTest, AppendEmptyIsIgnored) {
  OutputRing r(100);
  r.Append(kOut, "");
  EXPECT_EQ(r.end_offset(), 0u);
  uint64_t dropped;
  EXPECT_TRUE(ReadAll(r, 0, &dropped).empty());
}

TEST(OutputRingTest, ChannelsAreSeparateChunksWithAbsoluteOffsets) {
  OutputRing r(1000);
  r.Append(kOut, "hello ");
  r.Append(kErr, "oops");
  r.Append(kOut, "world");
  EXPECT_EQ(r.first_offset(), 0u);
  EXPECT_EQ(r.end_offset(), 15u);
  uint64_t dropped = 99;
  auto c = ReadAll(r, 0, &dropped);
  EXPECT_EQ(dropped, 0u);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].offset, 0u);
  EXPECT_EQ(c[0].channel, kOut);
  EXPECT_EQ(c[0].data, "hello ");
  EXPECT_EQ(c[1].offset, 6u);
  EXPECT_EQ(c[1].channel, kErr);
  EXPECT_EQ(c[1].data, "oops");
  EXPECT_EQ(c[2].offset, 10u);
  EXPECT_EQ(c[2].channel, kOut);
  EXPECT_EQ(c[2].data, "world");
}

TEST(OutputRingTest, ConsecutiveWritesOnOneChannelAreJoined) {
  OutputRing r(1000);
  r.Append(kOut, "a");
  r.Append(kOut, "b");
  r.Append(kOut, "c");
  uint64_t dropped;
  auto c = ReadAll(r, 0, &dropped);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].data, "abc");
  EXPECT_EQ(c[0].channel, kOut);
}

TEST(OutputRingTest, LongRunsOnOneChannelStayContiguous) {
  OutputRing r(1 << 20);
  std::string expected;
  for (int i = 0; i < 100; ++i) {
    std::string piece(1000, static_cast<char>('a' + i % 26));
    r.Append(kOut, piece);
    expected += piece;
  }
  uint64_t dropped;
  auto c = ReadAll(r, 0, &dropped);
  ExpectContiguous(c);
  EXPECT_EQ(Join(c), expected);
  for (const auto& ch : c) EXPECT_EQ(ch.channel, kOut);
}

TEST(OutputRingTest, TrimsFromTheFrontAtCapacity) {
  OutputRing r(10);
  r.Append(kOut, "aaaaaa");
  r.Append(kErr, "bbbbbb");  // 12 bytes: the 2 oldest go
  EXPECT_EQ(r.first_offset(), 2u);
  EXPECT_EQ(r.end_offset(), 12u);
  uint64_t dropped;
  auto c = ReadAll(r, 2, &dropped);
  EXPECT_EQ(dropped, 0u);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].offset, 2u);
  EXPECT_EQ(c[0].channel, kOut);
  EXPECT_EQ(c[0].data, "aaaa");
  EXPECT_EQ(c[1].offset, 6u);
  EXPECT_EQ(c[1].channel, kErr);
  EXPECT_EQ(c[1].data, "bbbbbb");
}

TEST(OutputRingTest, TrimsWholeChunksThenPartOfOne) {
  OutputRing r(4);
  r.Append(kOut, "abc");
  r.Append(kErr, "de");
  r.Append(kOut, "fgh");  // 8 bytes: "abc" goes whole, "d" of "de"
  EXPECT_EQ(r.first_offset(), 4u);
  EXPECT_EQ(r.end_offset(), 8u);
  uint64_t dropped;
  auto c = ReadAll(r, 0, &dropped);
  EXPECT_EQ(dropped, 4u);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].offset, 4u);
  EXPECT_EQ(c[0].channel, kErr);
  EXPECT_EQ(c[0].data, "e");
  EXPECT_EQ(c[1].offset, 5u);
  EXPECT_EQ(c[1].channel, kOut);
  EXPECT_EQ(c[1].data, "fgh");
}

TEST(OutputRingTest, SingleAppendLargerThanCapacityKeepsItsTail) {
  OutputRing r(5);
  r.Append(kOut, "0123456789");
  EXPECT_EQ(r.first_offset(), 5u);
  EXPECT_EQ(r.end_offset(), 10u);
  uint64_t dropped;
  auto c = ReadAll(r, 0, &dropped);
  EXPECT_EQ(dropped, 5u);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].offset, 5u);
  EXPECT_EQ(c[0].data, "56789");
}

TEST(OutputRingTest, ReadFromACursorInsideAChunk) {
  OutputRing r(100);
  r.Append(kOut, "0123456789");
  r.Append(kErr, "abcdef");
  uint64_t dropped = 99;
  auto c = ReadAll(r, 4, &dropped);
  EXPECT_EQ(dropped, 0u);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].offset, 4u);
  EXPECT_EQ(c[0].data, "456789");
  EXPECT_EQ(c[1].offset, 10u);
  EXPECT_EQ(c[1].data, "abcdef");
  // Inside the second chunk: the first is skipped entirely.
  c = ReadAll(r, 13, &dropped);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].offset, 13u);
  EXPECT_EQ(c[0].channel, kErr);
  EXPECT_EQ(c[0].data, "def");
  // Exactly at a chunk boundary.
  c = ReadAll(r, 10, &dropped);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].data, "abcdef");
}

TEST(OutputRingTest, ReadAtOrPastTheEndIsEmpty) {
  OutputRing r(100);
  r.Append(kOut, "abc");
  uint64_t dropped = 99;
  EXPECT_TRUE(ReadAll(r, 3, &dropped).empty());
  EXPECT_EQ(dropped, 0u);
  EXPECT_TRUE(ReadAll(r, 1000, &dropped).empty());
  EXPECT_EQ(dropped, 0u);
}

TEST(OutputRingTest, DroppedCountsBytesBeforeFirstOffset) {
  OutputRing r(10);
  for (int i = 0; i < 10; ++i) r.Append(i % 2 ? kErr : kOut, "12345");  // 50 bytes, 40 gone
  EXPECT_EQ(r.first_offset(), 40u);
  EXPECT_EQ(r.end_offset(), 50u);
  uint64_t dropped;
  auto c = ReadAll(r, 0, &dropped);
  EXPECT_EQ(dropped, 40u);
  EXPECT_EQ(Join(c), "1234512345");
  EXPECT_EQ(c.front().offset, 40u);
  c = ReadAll(r, 37, &dropped);
  EXPECT_EQ(dropped, 3u);
  EXPECT_EQ(c.front().offset, 40u);
  c = ReadAll(r, 40, &dropped);
  EXPECT_EQ(dropped, 0u);
  EXPECT_EQ(Join(c), "1234512345");
  c = ReadAll(r, 43, &dropped);
  EXPECT_EQ(dropped, 0u);
  EXPECT_EQ(Join(c), "4512345");
}

TEST(OutputRingTest, MaxBytesLimitsTheRead) {
  OutputRing r(100);
  r.Append(kOut, "abc");
  r.Append(kErr, "def");
  r.Append(kOut, "ghi");
  uint64_t dropped;
  auto c = r.Read(1, 4, &dropped);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].offset, 1u);
  EXPECT_EQ(c[0].data, "bc");
  EXPECT_EQ(c[1].offset, 3u);
  EXPECT_EQ(c[1].data, "de");
  EXPECT_EQ(c[1].channel, kErr);
  EXPECT_EQ(Join(r.Read(0, 3, &dropped)), "abc");
  EXPECT_EQ(r.Read(0, 3, &dropped).size(), 1u);
  EXPECT_EQ(Join(r.Read(0, 1, &dropped)), "a");
  EXPECT_TRUE(r.Read(0, 0, &dropped).empty());
  EXPECT_EQ(Join(r.Read(0, 9, &dropped)), "abcdefghi");
  EXPECT_EQ(Join(r.Read(0, 1000, &dropped)), "abcdefghi");
}

TEST(OutputRingTest, ReaderResumingWithItsCursorSeesEveryByteOnce) {
  OutputRing r(64);
  std::string seen, written;
  uint64_t cursor = 0;
  for (int i = 0; i < 200; ++i) {
    std::string piece = std::to_string(i) + ",";
    r.Append(i % 3 == 0 ? kErr : kOut, piece);
    written += piece;
    uint64_t dropped;
    auto c = r.Read(cursor, 7, &dropped);  // small reads: the reader keeps up, barely
    ASSERT_EQ(dropped, 0u) << i;
    ExpectContiguous(c);
    if (!c.empty()) {
      ASSERT_EQ(c.front().offset, cursor);
      cursor = c.back().offset + c.back().data.size();
    }
    seen += Join(c);
  }
  // Drain the rest.
  for (;;) {
    uint64_t dropped;
    auto c = r.Read(cursor, 7, &dropped);
    if (c.empty()) break;
    cursor = c.back().offset + c.back().data.size();
    seen += Join(c);
  }
  EXPECT_EQ(cursor, r.end_offset());
  EXPECT_EQ(seen, written);
}

TEST(OutputRingTest, RandomAppendsKeepInvariants) {
  std::mt19937 rng(12345);
  const size_t capacity = 1000;
  OutputRing r(capacity);
  std::string stream;             // everything ever written
  std::vector<uint8_t> channels;  // channel of each byte
  for (int i = 0; i < 2000; ++i) {
    uint8_t ch = rng() % 2 ? kOut : kErr;
    size_t n = rng() % (i % 100 == 0 ? 3000 : 50);
    std::string piece(n, '\0');
    for (auto& b : piece) b = static_cast<char>(rng());
    r.Append(ch, piece);
    stream += piece;
    channels.insert(channels.end(), n, ch);

    ASSERT_EQ(r.end_offset(), stream.size());
    ASSERT_LE(r.end_offset() - r.first_offset(), capacity);
    uint64_t dropped;
    auto c = r.Read(0, SIZE_MAX, &dropped);
    ASSERT_EQ(dropped, r.first_offset());
    std::string held = Join(c);
    ASSERT_EQ(held.size(), r.end_offset() - r.first_offset());
    // Full while the stream is longer than the capacity.
    if (stream.size() >= capacity) {
      ASSERT_EQ(held.size(), capacity);
    }
    ASSERT_EQ(held, stream.substr(r.first_offset()));
    for (size_t k = 1; k < c.size(); ++k)
      ASSERT_EQ(c[k].offset, c[k - 1].offset + c[k - 1].data.size());
    for (const auto& chunk : c) {
      ASSERT_FALSE(chunk.data.empty());
      for (size_t k = 0; k < chunk.data.size(); ++k)
        ASSERT_EQ(channels[chunk.offset + k], chunk.channel) << "offset " << chunk.offset + k;
    }
  }
}

}  // namespace
}  // namespace output_ring_test
}  // namespace kiln::agent
