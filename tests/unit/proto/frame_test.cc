// Agent channel framing (src/proto/frame.h): encoding, incremental decoding,
// fragmentation/reassembly, corruption detection and resynchronisation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "proto/frame.h"

namespace kiln::proto {
namespace frame_test {
namespace {

const FrameType kAllTypes[] = {FrameType::kRequest,  FrameType::kData,   FrameType::kEvent,
                               FrameType::kResponse, FrameType::kCancel, FrameType::kWindow,
                               FrameType::kHello};

// Deterministic bytes covering all 256 values (including NUL).
std::string Pattern(size_t n, uint8_t seed = 0) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(static_cast<uint8_t>(i * 31 + seed));
  return s;
}

std::vector<Frame> DrainAll(FrameDecoder& dec) {
  std::vector<Frame> out;
  while (auto f = dec.Next()) out.push_back(std::move(*f));
  return out;
}

TEST(FrameTest, HeaderLayoutIsLittleEndianLengthStreamTypeFlagsChannel) {
  std::string f = EncodeFrame(FrameType::kData, 0x01020304, "hello", kFlagEnd, kStderr);
  ASSERT_EQ(f.size(), kHeaderSize + 5);
  EXPECT_EQ(static_cast<uint8_t>(f[0]), 5);
  EXPECT_EQ(static_cast<uint8_t>(f[1]), 0);
  EXPECT_EQ(static_cast<uint8_t>(f[2]), 0);
  EXPECT_EQ(static_cast<uint8_t>(f[3]), 0);
  EXPECT_EQ(static_cast<uint8_t>(f[4]), 0x04);
  EXPECT_EQ(static_cast<uint8_t>(f[5]), 0x03);
  EXPECT_EQ(static_cast<uint8_t>(f[6]), 0x02);
  EXPECT_EQ(static_cast<uint8_t>(f[7]), 0x01);
  EXPECT_EQ(static_cast<uint8_t>(f[8]), static_cast<uint8_t>(FrameType::kData));
  EXPECT_EQ(static_cast<uint8_t>(f[9]), kFlagEnd);
  EXPECT_EQ(static_cast<uint8_t>(f[10]), kStderr);
  EXPECT_EQ(f.substr(kHeaderSize), "hello");
}

TEST(FrameTest, AppendFrameAppendsToExistingBuffer) {
  std::string out = "prefix";
  AppendFrame(out, FrameType::kEvent, 3, "abc");
  EXPECT_EQ(out, "prefix" + EncodeFrame(FrameType::kEvent, 3, "abc"));
}

TEST(FrameTest, RoundTripEveryFrameType) {
  for (FrameType t : kAllTypes) {
    SCOPED_TRACE(static_cast<int>(t));
    std::string payload = Pattern(100 + static_cast<int>(t), static_cast<uint8_t>(t));
    uint32_t stream = 0xABCD0000u + static_cast<uint32_t>(t);
    FrameDecoder dec(kMaxAgentPayload);
    dec.Feed(EncodeFrame(t, stream, payload, kFlagMore | kFlagEnd, kStdout));
    auto f = dec.Next();
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->type, t);
    EXPECT_EQ(f->stream, stream);
    EXPECT_EQ(f->flags, kFlagMore | kFlagEnd);
    EXPECT_EQ(f->channel, kStdout);
    EXPECT_EQ(f->payload, payload);
    EXPECT_FALSE(dec.error());
    EXPECT_EQ(dec.buffered(), 0u);
    EXPECT_FALSE(dec.Next().has_value());
  }
}

TEST(FrameTest, EmptyPayloadAndMaxStreamId) {
  FrameDecoder dec(16);
  dec.Feed(EncodeFrame(FrameType::kCancel, 0xFFFFFFFFu, ""));
  auto f = dec.Next();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->type, FrameType::kCancel);
  EXPECT_EQ(f->stream, 0xFFFFFFFFu);
  EXPECT_TRUE(f->payload.empty());
  EXPECT_EQ(f->flags, 0);
  EXPECT_EQ(f->channel, 0);
}

TEST(FrameTest, SeveralFramesInOneFeedDecodeInOrder) {
  std::string wire;
  for (int i = 0; i < 10; ++i) AppendFrame(wire, FrameType::kData, i, Pattern(i * 7, i), 0, i % 3);
  FrameDecoder dec(kMaxAgentPayload);
  dec.Feed(wire);
  auto frames = DrainAll(dec);
  ASSERT_EQ(frames.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(frames[i].stream, static_cast<uint32_t>(i));
    EXPECT_EQ(frames[i].channel, i % 3);
    EXPECT_EQ(frames[i].payload, Pattern(i * 7, i));
  }
  EXPECT_FALSE(dec.error());
  EXPECT_EQ(dec.buffered(), 0u);
}

TEST(FrameTest, DecoderFedByteByByte) {
  std::string wire;
  AppendFrame(wire, FrameType::kRequest, 1, R"({"op":"exec"})");
  AppendFrame(wire, FrameType::kData, 1, Pattern(300), 0, kStdin);
  AppendFrame(wire, FrameType::kData, 1, "", kFlagEnd, kStdin);
  AppendFrame(wire, FrameType::kWindow, 1, std::string("\x10\x00\x00\x00", 4));

  FrameDecoder dec(kMaxDaemonPayload);
  std::vector<Frame> frames;
  for (size_t i = 0; i < wire.size(); ++i) {
    dec.Feed(std::string_view(&wire[i], 1));
    while (auto f = dec.Next()) frames.push_back(std::move(*f));
    ASSERT_FALSE(dec.error()) << "at byte " << i;
  }
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(frames[0].type, FrameType::kRequest);
  EXPECT_EQ(frames[0].payload, R"({"op":"exec"})");
  EXPECT_EQ(frames[1].payload, Pattern(300));
  EXPECT_EQ(frames[2].flags, kFlagEnd);
  EXPECT_TRUE(frames[2].payload.empty());
  EXPECT_EQ(frames[3].type, FrameType::kWindow);
  EXPECT_EQ(DecodeWindow(frames[3].payload), 16u);
  EXPECT_EQ(dec.buffered(), 0u);
}

TEST(FrameTest, IncompleteFrameWaitsForMoreBytes) {
  std::string wire = EncodeFrame(FrameType::kEvent, 9, "0123456789");
  FrameDecoder dec(64);
  dec.Feed(wire.substr(0, kHeaderSize - 1));
  EXPECT_FALSE(dec.Next().has_value());
  EXPECT_FALSE(dec.error());
  dec.Feed(wire.substr(kHeaderSize - 1, 5));  // header complete, payload partial
  EXPECT_FALSE(dec.Next().has_value());
  EXPECT_FALSE(dec.error());
  EXPECT_EQ(dec.buffered(), kHeaderSize + 4);
  dec.Feed(wire.substr(kHeaderSize + 4));
  auto f = dec.Next();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->payload, "0123456789");
}

TEST(FrameTest, PayloadExactlyAtLimitIsAccepted) {
  FrameDecoder dec(kMaxDaemonPayload);
  dec.Feed(EncodeFrame(FrameType::kData, 1, Pattern(kMaxDaemonPayload)));
  auto f = dec.Next();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->payload.size(), kMaxDaemonPayload);
  EXPECT_FALSE(dec.error());
}

TEST(FrameTest, OversizeLengthIsRejectedFromTheHeaderAlone) {
  FrameDecoder dec(kMaxDaemonPayload);
  std::string wire = EncodeFrame(FrameType::kData, 1, Pattern(kMaxDaemonPayload + 1));
  // Only the header: the decoder must not wait for a payload it will refuse.
  dec.Feed(wire.substr(0, kHeaderSize));
  EXPECT_FALSE(dec.Next().has_value());
  EXPECT_TRUE(dec.error());
  // Once in error it yields nothing more, even a valid frame.
  dec.Feed(wire.substr(kHeaderSize));
  dec.Feed(EncodeFrame(FrameType::kData, 2, "ok"));
  EXPECT_FALSE(dec.Next().has_value());
  EXPECT_TRUE(dec.error());
}

TEST(FrameTest, AgentSideLimitRejectsOneByteOver) {
  // The daemon's decoder (kMaxAgentPayload) refuses a 64 KiB + 1 frame with
  // a perfectly valid header.
  std::string wire = EncodeFrame(FrameType::kData, 3, Pattern(kMaxAgentPayload + 1));
  FrameDecoder dec(kMaxAgentPayload);
  dec.Feed(wire);
  EXPECT_FALSE(dec.Next().has_value());
  EXPECT_TRUE(dec.error());
}

TEST(FrameTest, InvalidTypeIsRejected) {
  // Type 0 and 8 are outside the enum; the check byte is valid because the
  // encoder computed it, so only the type check can catch them.
  for (int t : {0, 8, 255}) {
    FrameDecoder dec(kMaxAgentPayload);
    dec.Feed(EncodeFrame(static_cast<FrameType>(t), 1, "x"));
    EXPECT_FALSE(dec.Next().has_value()) << t;
    EXPECT_TRUE(dec.error()) << t;
  }
}

TEST(FrameTest, CorruptedCheckByteIsRejected) {
  std::string wire = EncodeFrame(FrameType::kResponse, 4, "{}");
  wire[11] = static_cast<char>(wire[11] ^ 0x01);
  FrameDecoder dec(kMaxAgentPayload);
  dec.Feed(wire);
  EXPECT_FALSE(dec.Next().has_value());
  EXPECT_TRUE(dec.error());
}

TEST(FrameTest, AnySingleBitFlipInTheHeaderIsDetected) {
  const std::string good =
      EncodeFrame(FrameType::kEvent, 0x00C0FFEE, "payload", kFlagMore, kStdout);
  for (size_t byte = 0; byte < kHeaderSize; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = good;
      bad[byte] = static_cast<char>(bad[byte] ^ (1 << bit));
      FrameDecoder dec(kMaxAgentPayload);
      dec.Feed(bad);
      auto f = dec.Next();
      EXPECT_FALSE(f.has_value()) << "byte " << byte << " bit " << bit;
      EXPECT_TRUE(dec.error()) << "byte " << byte << " bit " << bit;
    }
  }
}

TEST(FrameTest, GarbageInsteadOfAHeaderIsRejected) {
  FrameDecoder dec(kMaxAgentPayload);
  dec.Feed("this is not a frame header at all");
  EXPECT_FALSE(dec.Next().has_value());
  EXPECT_TRUE(dec.error());
}

TEST(FrameTest, EncodeFragmentsSplitsWithMoreFlag) {
  std::string msg = Pattern(2500);
  auto frags = EncodeFragments(FrameType::kRequest, 42, msg, 1000, kStderr);
  ASSERT_EQ(frags.size(), 3u);
  FrameDecoder dec(1000);
  for (const auto& f : frags) dec.Feed(f);
  auto frames = DrainAll(dec);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].flags, kFlagMore);
  EXPECT_EQ(frames[1].flags, kFlagMore);
  EXPECT_EQ(frames[2].flags, 0);
  EXPECT_EQ(frames[0].payload.size(), 1000u);
  EXPECT_EQ(frames[1].payload.size(), 1000u);
  EXPECT_EQ(frames[2].payload.size(), 500u);
  for (const auto& f : frames) {
    EXPECT_EQ(f.type, FrameType::kRequest);
    EXPECT_EQ(f.stream, 42u);
    EXPECT_EQ(f.channel, kStderr);
  }
  EXPECT_EQ(frames[0].payload + frames[1].payload + frames[2].payload, msg);
}

TEST(FrameTest, EncodeFragmentsExactMultipleHasNoEmptyTail) {
  auto frags = EncodeFragments(FrameType::kResponse, 1, Pattern(2000), 1000);
  ASSERT_EQ(frags.size(), 2u);
  EXPECT_EQ(frags[0].size(), kHeaderSize + 1000);
  EXPECT_EQ(frags[1].size(), kHeaderSize + 1000);
  EXPECT_EQ(static_cast<uint8_t>(frags[0][9]), kFlagMore);
  EXPECT_EQ(static_cast<uint8_t>(frags[1][9]), 0);
}

TEST(FrameTest, EncodeFragmentsOfEmptyOrSmallMessageIsOneFrame) {
  auto empty = EncodeFragments(FrameType::kRequest, 5, "", 1000);
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_EQ(empty[0], EncodeFrame(FrameType::kRequest, 5, ""));
  auto small = EncodeFragments(FrameType::kRequest, 5, "{}", 1000);
  ASSERT_EQ(small.size(), 1u);
  EXPECT_EQ(small[0], EncodeFrame(FrameType::kRequest, 5, "{}"));
}

TEST(FrameTest, EveryDaemonSideFragmentFitsInPipeBuf) {
  // kilnd -> agent frames must be <= kMaxDaemonFrame so one write(2) to the
  // FIFO is atomic. Try sizes around every boundary.
  static_assert(kMaxDaemonPayload + kHeaderSize == kMaxDaemonFrame);
  const size_t sizes[] = {0,
                          1,
                          kMaxDaemonPayload - 1,
                          kMaxDaemonPayload,
                          kMaxDaemonPayload + 1,
                          kMaxDaemonFrame,
                          2 * kMaxDaemonPayload,
                          2 * kMaxDaemonPayload + 1,
                          100000,
                          1 << 20};
  for (size_t n : sizes) {
    SCOPED_TRACE(n);
    std::string msg = Pattern(n, 7);
    auto frags = EncodeFragments(FrameType::kRequest, 77, msg, kMaxDaemonPayload);
    size_t expected = n == 0 ? 1 : (n + kMaxDaemonPayload - 1) / kMaxDaemonPayload;
    EXPECT_EQ(frags.size(), expected);
    FrameDecoder dec(kMaxDaemonPayload);  // what the agent runs
    Reassembler re;
    std::optional<std::string> whole;
    for (size_t i = 0; i < frags.size(); ++i) {
      EXPECT_LE(frags[i].size(), kMaxDaemonFrame) << "fragment " << i;
      dec.Feed(frags[i]);
      auto f = dec.Next();
      ASSERT_TRUE(f.has_value()) << "fragment " << i;
      EXPECT_EQ((f->flags & kFlagMore) != 0, i + 1 < frags.size());
      whole = re.Add(*f);
      EXPECT_EQ(whole.has_value(), i + 1 == frags.size());
    }
    ASSERT_TRUE(whole.has_value());
    EXPECT_EQ(*whole, msg);
    EXPECT_FALSE(dec.error());
  }
  // Window, cancel and hello frames the daemon sends are small too.
  EXPECT_LE(EncodeWindow(1, 0xFFFFFFFFu).size(), kMaxDaemonFrame);
  EXPECT_LE(EncodeFrame(FrameType::kCancel, 1, "").size(), kMaxDaemonFrame);
}

TEST(FrameTest, ReassemblerCapsOneMessageAndAllUnfinishedOnes) {
  auto more = [](uint32_t stream, size_t n) {
    return Frame{FrameType::kEvent, kFlagMore, 0, stream, std::string(n, 'x')};
  };
  // One message past its cap: an error, and nothing more is taken.
  Reassembler one(100, 1000);
  EXPECT_FALSE(one.Add(more(1, 60)));
  EXPECT_FALSE(one.error());
  EXPECT_FALSE(one.Add(more(1, 60)));
  EXPECT_TRUE(one.error());
  EXPECT_FALSE(one.Add(Frame{FrameType::kEvent, 0, 0, 2, "whole"}));
  // Many unfinished messages past the total cap: an error too.
  Reassembler many(100, 250);
  for (uint32_t s = 1; s <= 3; ++s) EXPECT_FALSE(many.Add(more(s, 80)));
  EXPECT_FALSE(many.error());
  EXPECT_FALSE(many.Add(more(4, 80)));
  EXPECT_TRUE(many.error());
  // Dropping a stream gives its bytes back.
  Reassembler dropped(100, 250);
  for (uint32_t s = 1; s <= 3; ++s) dropped.Add(more(s, 80));
  dropped.Drop(1);
  dropped.Drop(2);
  EXPECT_FALSE(dropped.Add(more(4, 80)));
  EXPECT_FALSE(dropped.error());
  auto whole = dropped.Add(Frame{FrameType::kEvent, 0, 0, 3, "!"});
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->size(), 81u);
}

TEST(FrameTest, ReassemblerPassesUnfragmentedMessageThrough) {
  Reassembler re;
  Frame f{FrameType::kResponse, 0, 0, 3, "{\"ok\":true}"};
  auto out = re.Add(f);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(*out, "{\"ok\":true}");
}

TEST(FrameTest, ReassemblerJoinsInterleavedStreams) {
  std::string a = Pattern(5000, 1), b = Pattern(3000, 2), c = "small";
  auto fa = EncodeFragments(FrameType::kEvent, 1, a, 1024);
  auto fb = EncodeFragments(FrameType::kEvent, 2, b, 1024);
  auto fc = EncodeFragments(FrameType::kEvent, 3, c, 1024);
  ASSERT_EQ(fa.size(), 5u);
  ASSERT_EQ(fb.size(), 3u);
  // Round-robin the streams on one wire.
  std::string wire;
  size_t ia = 0, ib = 0;
  bool c_sent = false;
  while (ia < fa.size() || ib < fb.size()) {
    if (ia < fa.size()) wire += fa[ia++];
    if (ib < fb.size()) wire += fb[ib++];
    if (!c_sent && ia == 2) {
      wire += fc[0];
      c_sent = true;
    }
  }
  FrameDecoder dec(1024);
  dec.Feed(wire);
  Reassembler re;
  std::map<uint32_t, std::string> done;
  std::vector<uint32_t> order;
  while (auto f = dec.Next()) {
    if (auto m = re.Add(*f)) {
      EXPECT_FALSE(done.count(f->stream)) << "stream " << f->stream << " completed twice";
      done[f->stream] = *m;
      order.push_back(f->stream);
    }
  }
  EXPECT_FALSE(dec.error());
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[1], a);
  EXPECT_EQ(done[2], b);
  EXPECT_EQ(done[3], c);
  EXPECT_EQ(order, (std::vector<uint32_t>{3, 2, 1}));
}

TEST(FrameTest, ReassemblerDropForgetsAPartialMessage) {
  Reassembler re;
  EXPECT_FALSE(re.Add(Frame{FrameType::kEvent, kFlagMore, 0, 7, "old-"}).has_value());
  EXPECT_FALSE(re.Add(Frame{FrameType::kEvent, kFlagMore, 0, 8, "keep-"}).has_value());
  re.Drop(7);
  auto m7 = re.Add(Frame{FrameType::kEvent, 0, 0, 7, "new"});
  ASSERT_TRUE(m7.has_value());
  EXPECT_EQ(*m7, "new");
  auto m8 = re.Add(Frame{FrameType::kEvent, 0, 0, 8, "end"});
  ASSERT_TRUE(m8.has_value());
  EXPECT_EQ(*m8, "keep-end");
}

TEST(FrameTest, ReassemblerClearForgetsEverything) {
  Reassembler re;
  re.Add(Frame{FrameType::kEvent, kFlagMore, 0, 1, "a"});
  re.Add(Frame{FrameType::kEvent, kFlagMore, 0, 2, "b"});
  re.Clear();
  EXPECT_EQ(re.Add(Frame{FrameType::kEvent, 0, 0, 1, "x"}).value_or("?"), "x");
  EXPECT_EQ(re.Add(Frame{FrameType::kEvent, 0, 0, 2, "y"}).value_or("?"), "y");
}

TEST(FrameTest, ReassemblerStartsFreshAfterACompletedMessage) {
  Reassembler re;
  re.Add(Frame{FrameType::kEvent, kFlagMore, 0, 1, "ab"});
  EXPECT_EQ(re.Add(Frame{FrameType::kEvent, 0, 0, 1, "c"}).value_or("?"), "abc");
  re.Add(Frame{FrameType::kEvent, kFlagMore, 0, 1, "d"});
  EXPECT_EQ(re.Add(Frame{FrameType::kEvent, 0, 0, 1, "e"}).value_or("?"), "de");
}

TEST(FrameTest, WindowRoundTrip) {
  const uint32_t values[] = {0u, 1u, 255u, 256u, 65536u, kStreamWindow, 0x7FFFFFFFu, 0xFFFFFFFFu};
  for (uint32_t v : values) {
    std::string w = EncodeWindow(12, v);
    ASSERT_EQ(w.size(), kHeaderSize + 4);
    FrameDecoder dec(kMaxDaemonPayload);
    dec.Feed(w);
    auto f = dec.Next();
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->type, FrameType::kWindow);
    EXPECT_EQ(f->stream, 12u);
    EXPECT_EQ(DecodeWindow(f->payload), v);
  }
}

TEST(FrameTest, DecodeWindowIsLittleEndianAndRejectsWrongSize) {
  EXPECT_EQ(DecodeWindow(std::string("\x01\x02\x03\x04", 4)), 0x04030201u);
  EXPECT_EQ(DecodeWindow(""), 0u);
  EXPECT_EQ(DecodeWindow(std::string("\x01\x02\x03", 3)), 0u);
  EXPECT_EQ(DecodeWindow(std::string("\x01\x02\x03\x04\x05", 5)), 0u);
}

TEST(FrameTest, SyncMarkerIsMagicPlusNonce) {
  std::string m = SyncMarker(0x1122334455667788ull);
  ASSERT_EQ(m.size(), kSyncMarkerSize);
  EXPECT_EQ(m.substr(0, 8), kSyncMagic);
  EXPECT_NE(SyncMarker(1), SyncMarker(2));
}

TEST(FrameTest, SkipToSyncAfterGarbageThenFramesDecode) {
  const uint64_t nonce = 0xDEADBEEFCAFEF00Dull;
  FrameDecoder dec(kMaxAgentPayload);
  // A half frame from a previous session, then some noise, then the marker.
  std::string old = EncodeFrame(FrameType::kData, 1, Pattern(500));
  std::string wire = old.substr(200) + "garbage KILNSYNC but wrong nonce" + SyncMarker(nonce ^ 1) +
                     SyncMarker(nonce) + EncodeFrame(FrameType::kResponse, 5, "{\"ok\":1}") +
                     EncodeFrame(FrameType::kEvent, 6, "{}");
  dec.Feed(wire);
  ASSERT_TRUE(dec.SkipToSync(nonce));
  auto f1 = dec.Next();
  ASSERT_TRUE(f1.has_value());
  EXPECT_EQ(f1->type, FrameType::kResponse);
  EXPECT_EQ(f1->stream, 5u);
  EXPECT_EQ(f1->payload, "{\"ok\":1}");
  auto f2 = dec.Next();
  ASSERT_TRUE(f2.has_value());
  EXPECT_EQ(f2->stream, 6u);
  EXPECT_FALSE(dec.error());
  EXPECT_EQ(dec.buffered(), 0u);
}

TEST(FrameTest, SkipToSyncClearsAPreviousError) {
  const uint64_t nonce = 99;
  FrameDecoder dec(kMaxAgentPayload);
  dec.Feed("definitely not a frame header");
  EXPECT_FALSE(dec.Next().has_value());
  ASSERT_TRUE(dec.error());
  dec.Feed(SyncMarker(nonce) + EncodeFrame(FrameType::kResponse, 1, "r"));
  ASSERT_TRUE(dec.SkipToSync(nonce));
  EXPECT_FALSE(dec.error());
  auto f = dec.Next();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->payload, "r");
}

TEST(FrameTest, SkipToSyncWithoutMarkerKeepsOnlyAShortTail) {
  FrameDecoder dec(kMaxAgentPayload);
  dec.Feed(std::string(10000, 'z'));
  EXPECT_FALSE(dec.SkipToSync(1234));
  EXPECT_LE(dec.buffered(), kSyncMarkerSize);
  EXPECT_GE(dec.buffered(), kSyncMarkerSize - 1);  // enough to hold a split marker
}

TEST(FrameTest, SkipToSyncFindsMarkerSplitAcrossFeedsAtEveryPosition) {
  const uint64_t nonce = 0x0102030405060708ull;
  const std::string marker = SyncMarker(nonce);
  const std::string after = EncodeFrame(FrameType::kResponse, 11, "after-sync");
  for (size_t split = 0; split <= marker.size(); ++split) {
    SCOPED_TRACE(split);
    FrameDecoder dec(kMaxAgentPayload);
    dec.Feed(std::string(1000, '#') + marker.substr(0, split));
    bool synced = dec.SkipToSync(nonce);
    EXPECT_EQ(synced, split == marker.size());
    if (!synced) {
      dec.Feed(marker.substr(split));
      ASSERT_TRUE(dec.SkipToSync(nonce));
    }
    dec.Feed(after);
    auto f = dec.Next();
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->stream, 11u);
    EXPECT_EQ(f->payload, "after-sync");
  }
}

TEST(FrameTest, SkipToSyncWithMarkerFedByteByByte) {
  const uint64_t nonce = 0xFEEDFACE12345678ull;
  std::string wire = Pattern(777, 3) + SyncMarker(nonce) + EncodeFrame(FrameType::kEvent, 2, "ev") +
                     EncodeFrame(FrameType::kResponse, 2, "done");
  FrameDecoder dec(kMaxAgentPayload);
  bool synced = false;
  std::vector<Frame> frames;
  for (char c : wire) {
    dec.Feed(std::string_view(&c, 1));
    if (!synced) {
      synced = dec.SkipToSync(nonce);
      continue;
    }
    while (auto f = dec.Next()) frames.push_back(std::move(*f));
  }
  ASSERT_TRUE(synced);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].payload, "ev");
  EXPECT_EQ(frames[1].payload, "done");
  EXPECT_FALSE(dec.error());
}

TEST(FrameTest, SkipToSyncIgnoresMarkerForAnotherNonce) {
  FrameDecoder dec(kMaxAgentPayload);
  dec.Feed(SyncMarker(1));
  EXPECT_FALSE(dec.SkipToSync(2));
}

TEST(FrameTest, LargeStreamOfFramesAcrossCompaction) {
  // More than 1 MiB of frames consumed piecemeal exercises the buffer
  // compaction path while partial frames are pending.
  FrameDecoder dec(kMaxAgentPayload);
  std::string wire;
  const int n = 40;
  for (int i = 0; i < n; ++i)
    AppendFrame(wire, FrameType::kData, i, Pattern(kMaxAgentPayload, i), 0, kStdout);
  size_t pos = 0;
  int got = 0;
  while (pos < wire.size()) {
    size_t step = std::min<size_t>(wire.size() - pos, 50000);
    dec.Feed(std::string_view(wire).substr(pos, step));
    pos += step;
    while (auto f = dec.Next()) {
      ASSERT_EQ(f->stream, static_cast<uint32_t>(got));
      ASSERT_EQ(f->payload, Pattern(kMaxAgentPayload, got));
      ++got;
    }
  }
  EXPECT_EQ(got, n);
  EXPECT_FALSE(dec.error());
  EXPECT_EQ(dec.buffered(), 0u);
}

}  // namespace
}  // namespace frame_test
}  // namespace kiln::proto
