// envd's Connect codec (src/api/e2b/envd/connect.h): envelopes split as
// bytes arrive, caps, malformed input, and messages through both codecs.
#include "api/e2b/envd/connect.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "proto/filesystem.pb.h"
#include "proto/process.pb.h"

namespace e2b_connect_test {
namespace {

using kiln::Code;
using kiln::Status;
using namespace kiln::api::e2b::connect;

TEST(E2bConnect, EnvelopeHeaderIsFlagAndBigEndianLength) {
  std::string e = Envelope(kFlagEndStream, std::string(258, 'x'));
  ASSERT_EQ(e.size(), 5u + 258u);
  EXPECT_EQ(static_cast<uint8_t>(e[0]), 0x02);
  EXPECT_EQ(e.substr(1, 4), std::string("\x00\x00\x01\x02", 4));
}

TEST(E2bConnect, ReaderTakesEnvelopesByteByByte) {
  std::string wire = Envelope(0, "hello") + Envelope(0, "") + Envelope(0, "world!");
  EnvelopeReader r;
  std::vector<std::string> got;
  for (char c : wire) {
    ASSERT_TRUE(r.Feed(std::string_view(&c, 1)).ok());
    uint8_t flags;
    std::string msg;
    Status err;
    while (r.Next(&flags, &msg, &err) == EnvelopeReader::Got::kMessage) got.push_back(msg);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"hello", "", "world!"}));
  EXPECT_TRUE(r.Finish().ok());
}

TEST(E2bConnect, ReaderRefusesOversizedCompressedAndUnknownFlags) {
  uint8_t flags;
  std::string msg;
  Status err;
  {
    EnvelopeReader r(16);
    ASSERT_TRUE(r.Feed(Envelope(0, std::string(17, 'a'))).ok());
    EXPECT_EQ(r.Next(&flags, &msg, &err), EnvelopeReader::Got::kError);
    EXPECT_EQ(err.code(), Code::kPayloadTooLarge);
  }
  {
    // The header alone is enough to refuse: no need to wait for 4 GiB.
    EnvelopeReader r;
    ASSERT_TRUE(r.Feed(std::string("\x00\xff\xff\xff\xff", 5)).ok());
    EXPECT_EQ(r.Next(&flags, &msg, &err), EnvelopeReader::Got::kError);
  }
  {
    EnvelopeReader r;
    ASSERT_TRUE(r.Feed(Envelope(kFlagCompressed, "x")).ok());
    EXPECT_EQ(r.Next(&flags, &msg, &err), EnvelopeReader::Got::kError);
    EXPECT_NE(err.message().find("compressed"), std::string::npos);
  }
  {
    EnvelopeReader r;
    ASSERT_TRUE(r.Feed(Envelope(0x80, "x")).ok());
    EXPECT_EQ(r.Next(&flags, &msg, &err), EnvelopeReader::Got::kError);
    EXPECT_NE(err.message().find("0x80"), std::string::npos);
  }
}

TEST(E2bConnect, ReaderReportsATruncatedEnvelopeAtTheEnd) {
  EnvelopeReader r;
  std::string wire = Envelope(0, "hello");
  ASSERT_TRUE(r.Feed(wire.substr(0, 7)).ok());
  uint8_t flags;
  std::string msg;
  Status err;
  EXPECT_EQ(r.Next(&flags, &msg, &err), EnvelopeReader::Got::kNeedMore);
  Status end = r.Finish();
  EXPECT_EQ(end.code(), Code::kInvalidRequest);
  EXPECT_NE(end.message().find("7 bytes"), std::string::npos);
}

TEST(E2bConnect, ReaderCapsWhatIsBufferedUnread) {
  EnvelopeReader r(1024);
  // A caller that never takes messages out cannot grow the buffer forever.
  Status s;
  for (int i = 0; i < 1000 && s.ok(); ++i) s = r.Feed(std::string(1024, 'x'));
  EXPECT_FALSE(s.ok());
}

TEST(E2bConnect, ContentTypesAndTimeouts) {
  auto p = ParseContentType("application/connect+json; charset=utf-8");
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->streaming);
  EXPECT_TRUE(p->json);
  EXPECT_EQ(p->ContentType(), "application/connect+json");
  p = ParseContentType("Application/Proto");
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->streaming);
  EXPECT_FALSE(p->json);
  EXPECT_FALSE(ParseContentType("text/plain"));
  EXPECT_FALSE(ParseContentType("application/grpc"));

  EXPECT_FALSE(ParseTimeoutMs("")->has_value());
  EXPECT_EQ(**ParseTimeoutMs("60000"), 60000);
  EXPECT_FALSE(ParseTimeoutMs("12345678901").ok());
  EXPECT_FALSE(ParseTimeoutMs("-5").ok());
  EXPECT_TRUE(IdentityEncoding(""));
  EXPECT_TRUE(IdentityEncoding("identity"));
  EXPECT_FALSE(IdentityEncoding("gzip"));
}

TEST(E2bConnect, ErrorsCarryConnectCodes) {
  Status s(Code::kFileNotFound, "no such file");
  EXPECT_EQ(ConnectCode(s.code()), "not_found");
  EXPECT_EQ(HttpStatusOf("not_found"), 404);
  EXPECT_EQ(ConnectCode(Code::kFileExists), "already_exists");
  EXPECT_EQ(ConnectCode(Code::kUnauthorized), "unauthenticated");
  EXPECT_EQ(ConnectCode(Code::kAgentTimeout), "deadline_exceeded");
  EXPECT_EQ(HttpStatusOf("unavailable"), 503);
  auto body = nlohmann::json::parse(ErrorJson(s));
  EXPECT_EQ(body["code"], "not_found");
  EXPECT_EQ(body["message"], "no such file");
  auto end = nlohmann::json::parse(EndStreamJson(s));
  EXPECT_EQ(end["error"]["code"], "not_found");
  EXPECT_TRUE(end["metadata"].is_object());
  EXPECT_FALSE(nlohmann::json::parse(EndStreamJson(Status::Ok())).contains("error"));
}

TEST(E2bConnect, MessagesRoundTripInBothCodecs) {
  process::StartResponse start;
  start.mutable_event()->mutable_data()->set_stdout(std::string("a\0\xff", 3));
  for (bool json : {false, true}) {
    Codec codec(json);
    std::string wire = codec.Encode(start);
    process::StartResponse back;
    ASSERT_TRUE(codec.Decode(wire, &back).ok()) << json;
    EXPECT_EQ(back.event().data().stdout(), std::string("a\0\xff", 3));
  }
  // proto3 JSON as E2B's JS SDK sends it: camelCase, bytes in base64, enums
  // by name; unknown fields are ignored.
  process::StartRequest req;
  ASSERT_TRUE(Codec(true)
                  .Decode(R"({"process":{"cmd":"/bin/bash","args":["-l","-c","echo"],)"
                          R"("envs":{"A":"1"},"cwd":"/tmp"},"stdin":false,"newField":1})",
                          &req)
                  .ok());
  EXPECT_EQ(req.process().args_size(), 3);
  EXPECT_EQ(req.process().envs().at("A"), "1");
  EXPECT_TRUE(req.has_stdin());
  EXPECT_FALSE(req.stdin());
  process::SendSignalRequest sig;
  ASSERT_TRUE(Codec(true).Decode(R"({"process":{"pid":12},"signal":"SIGNAL_SIGKILL"})", &sig).ok());
  EXPECT_EQ(sig.signal(), process::SIGNAL_SIGKILL);
  process::SendInputRequest in;
  ASSERT_TRUE(Codec(true).Decode(R"({"process":{"tag":"t"},"input":{"stdin":"aGk="}})", &in).ok());
  EXPECT_EQ(in.input().stdin(), "hi");

  filesystem::ListDirResponse list;
  auto* e = list.add_entries();
  e->set_type(filesystem::FILE_TYPE_DIRECTORY);
  e->mutable_modified_time()->set_seconds(1700000000);
  std::string text = Codec(true).Encode(list);
  EXPECT_NE(text.find("FILE_TYPE_DIRECTORY"), std::string::npos) << text;
  EXPECT_NE(text.find("2023-11-14T22:13:20Z"), std::string::npos) << text;
}

TEST(E2bConnect, MalformedMessagesNameTheType) {
  process::StartRequest req;
  Status s = Codec(true).Decode("{not json", &req);
  EXPECT_EQ(s.code(), Code::kInvalidRequest);
  EXPECT_NE(s.message().find("process.StartRequest"), std::string::npos);
  s = Codec(false).Decode(std::string("\xff\xff\xff", 3), &req);
  EXPECT_EQ(s.code(), Code::kInvalidRequest);
}

}  // namespace
}  // namespace e2b_connect_test
