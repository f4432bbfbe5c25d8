// kiln CLI: the tunnel's frame codec, its credit window, `port-forward`'s
// [LOCAL:]REMOTE argument and the new sandbox verbs' command lines.
#include <gtest/gtest.h>

#include "cli/cli.h"
#include "cli/errors.h"
#include "cli/tunnel_frames.h"

namespace kiln::cli {
namespace cli_tunnel_test {
namespace {

using namespace std::string_literals;

TEST(TunnelFrames, EncodeIsKindBigEndianStreamPayload) {
  EXPECT_EQ(EncodeTunnelFrame('d', 0x01020304, "hi"), "d\x01\x02\x03\x04hi"s);
  EXPECT_EQ(EncodeTunnelFrame('o', 7), "o\0\0\0\x07"s);
  EXPECT_EQ(EncodeTunnelFrame('e', 0xFFFFFFFFu), "e\xFF\xFF\xFF\xFF"s);
}

TEST(TunnelFrames, DecodeRoundTripsAndRefusesShortOrUnknown) {
  std::string bin = EncodeTunnelFrame('d', 0x80000001u, std::string("\0\xFFx", 3));
  auto f = DecodeTunnelFrame(bin);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, 'd');
  EXPECT_EQ(f->stream, 0x80000001u);
  EXPECT_EQ(f->payload, std::string_view("\0\xFFx", 3));
  EXPECT_FALSE(DecodeTunnelFrame("d\0\0\0"s));
  EXPECT_FALSE(DecodeTunnelFrame("x\0\0\0\0"s));
  const std::string message = "c\0\0\0\x02"s + "closed";  // the view points into it
  auto closed = DecodeTunnelFrame(message);
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->stream, 2u);
  EXPECT_EQ(closed->payload, "closed");
}

TEST(TunnelFrames, AckCarriesA64BitCount) {
  EXPECT_EQ(DecodeTunnelAck("\0\0\0\x01\0\0\0\x02"s), (1ull << 32) + 2);
  EXPECT_FALSE(DecodeTunnelAck("\0\0\0\x01"s));
  EXPECT_FALSE(DecodeTunnelAck(""));
}

TEST(TunnelWindow, AtMostOneMebibytePastTheAcknowledgedCount) {
  CreditWindow w;
  EXPECT_TRUE(w.Fits(kTunnelWindow));
  EXPECT_FALSE(w.Fits(kTunnelWindow + 1));
  w.Spend(kTunnelWindow - 10);
  EXPECT_TRUE(w.Fits(10));
  EXPECT_FALSE(w.Fits(11));
  EXPECT_TRUE(w.Ack(100));
  EXPECT_TRUE(w.Fits(110));
  EXPECT_FALSE(w.Fits(111));
  EXPECT_TRUE(w.Ack(50));  // an older count never moves it back
  EXPECT_EQ(w.acked(), 100u);
  EXPECT_FALSE(w.Ack(w.sent() + 1)) << "more acknowledged than sent";
}

TEST(PortSpec, LocalDefaultsToRemoteAndZeroPicks) {
  EXPECT_EQ(ParsePortSpec("8080").local, 8080);
  EXPECT_EQ(ParsePortSpec("8080").remote, 8080);
  EXPECT_EQ(ParsePortSpec("9000:8080").local, 9000);
  EXPECT_EQ(ParsePortSpec("9000:8080").remote, 8080);
  EXPECT_EQ(ParsePortSpec("0:22").local, 0);
  EXPECT_EQ(ParsePortSpec("65535").remote, 65535);
}

TEST(PortSpec, RefusesBadPorts) {
  for (const char* bad :
       {"", "0", "65536", "x", "80:", ":80", "80:0", "-1:80", "1:2:3", "8o", " 80", "99999:80"}) {
    EXPECT_THROW(ParsePortSpec(bad), UsageError) << bad;
  }
}

TEST(TunnelVerbs, CommandLinesParse) {
  auto inv = ParseCommandLine({"sandbox", "port-forward", "sb1", "0:8000", "--address", "::1"});
  ASSERT_TRUE(inv.verb);
  EXPECT_EQ(inv.verb->name, "port-forward");
  EXPECT_EQ(inv.args.Get("address"), "::1");
  EXPECT_EQ(ParseCommandLine({"sandbox", "preview", "sb1", "80", "--public", "--ttl", "60"})
                .args.Has("public"),
            true);
  EXPECT_EQ(ParseCommandLine({"sandbox", "run-code", "sb1", "-", "--lang", "javascript"})
                .args.Get("lang"),
            "javascript");
  // --lang is the daemon's to judge (400 naming body.language): new kernels need no new CLI.
  EXPECT_EQ(ParseCommandLine({"sandbox", "run-code", "sb1", "-", "--lang", "r"}).args.Get("lang"),
            "r");
  EXPECT_TRUE(
      ParseCommandLine({"sandbox", "watch", "sb1", "/w", "--recursive"}).args.Has("recursive"));
  EXPECT_THROW(ParseCommandLine({"sandbox", "port-forward", "sb1"}), UsageError);
}

}  // namespace
}  // namespace cli_tunnel_test
}  // namespace kiln::cli
