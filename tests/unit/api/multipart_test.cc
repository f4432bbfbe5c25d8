// The streaming multipart/form-data reader (E2B envd's uploads, Daytona's bulk uploads)
// (src/api/multipart.h): parts split at any byte, caps, and
// malformed bodies.
#include "api/multipart.h"

#include <gtest/gtest.h>

namespace multipart_test {
namespace {

using kiln::Code;
using kiln::Status;
using kiln::api::MultipartReader;

struct Collect : MultipartReader::Handler {
  struct Got {
    MultipartReader::Part part;
    std::string data;
    bool ended = false;
  };
  std::vector<Got> parts;
  size_t max_piece = 0;
  Status OnPartBegin(const MultipartReader::Part& p) override {
    parts.push_back(Got{p, "", false});
    return Status::Ok();
  }
  Status OnPartData(std::string_view b) override {
    parts.back().data.append(b);
    max_piece = std::max(max_piece, b.size());
    return Status::Ok();
  }
  Status OnPartEnd() override {
    parts.back().ended = true;
    return Status::Ok();
  }
};

// What httpx sends for files=[("file", (path, data)), ...].
std::string Body(const std::string& boundary,
                 const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out;
  for (const auto& [name, data] : files) {
    out += "--" + boundary + "\r\n";
    out += "Content-Disposition: form-data; name=\"file\"; filename=\"" + name + "\"\r\n";
    out += "Content-Type: application/octet-stream\r\n\r\n";
    out += data + "\r\n";
  }
  out += "--" + boundary + "--\r\n";
  return out;
}

TEST(Multipart, BoundaryFromContentType) {
  EXPECT_EQ(*MultipartReader::BoundaryOf("multipart/form-data; boundary=abc123"), "abc123");
  EXPECT_EQ(*MultipartReader::BoundaryOf("Multipart/Form-Data; charset=x; boundary=\"a b;c\""),
            "a b;c");
  EXPECT_FALSE(MultipartReader::BoundaryOf("multipart/form-data").ok());
  EXPECT_FALSE(MultipartReader::BoundaryOf("text/plain; boundary=x").ok());
  EXPECT_FALSE(
      MultipartReader::BoundaryOf("multipart/form-data; boundary=" + std::string(71, 'x')).ok());
  EXPECT_FALSE(MultipartReader::BoundaryOf("multipart/form-data; boundary=\"open").ok());
}

TEST(Multipart, PartsSplitAtEveryByteComeOutWhole) {
  // Data that looks like a delimiter but is not one, and binary bytes.
  std::string tricky = "line\r\n--bound\r\n--boundar";
  tricky += std::string("\0\xff end", 6);
  std::string body = Body("boundary", {{"/a/one.txt", "hello"}, {"two.bin", tricky}, {"e", ""}});
  for (size_t piece : {size_t{1}, size_t{2}, size_t{7}, body.size()}) {
    Collect c;
    MultipartReader r("boundary", &c);
    for (size_t i = 0; i < body.size(); i += piece)
      ASSERT_TRUE(r.Feed(std::string_view(body).substr(i, piece)).ok()) << piece;
    ASSERT_TRUE(r.Finish().ok());
    ASSERT_EQ(c.parts.size(), 3u) << piece;
    EXPECT_EQ(c.parts[0].part.filename, "/a/one.txt");
    EXPECT_EQ(c.parts[0].part.name, "file");
    EXPECT_TRUE(c.parts[0].part.has_filename);
    EXPECT_EQ(c.parts[0].part.content_type, "application/octet-stream");
    EXPECT_EQ(c.parts[0].data, "hello");
    EXPECT_EQ(c.parts[1].data, tricky);
    EXPECT_EQ(c.parts[2].data, "");
    for (const auto& p : c.parts) EXPECT_TRUE(p.ended);
  }
}

TEST(Multipart, LargePartStreamsInBoundedPieces) {
  std::string big(1 << 20, 'z');
  std::string body = Body("B", {{"f", big}});
  Collect c;
  MultipartReader r("B", &c);
  for (size_t i = 0; i < body.size(); i += 65536)
    ASSERT_TRUE(r.Feed(std::string_view(body).substr(i, 65536)).ok());
  ASSERT_TRUE(r.Finish().ok());
  EXPECT_EQ(c.parts.at(0).data.size(), big.size());
  EXPECT_LE(c.max_piece, 65536u);
}

TEST(Multipart, PreambleFieldsAndEpilogue) {
  std::string body =
      "preamble to ignore\r\n--x\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n"
      "--x  \r\ncontent-disposition: form-data; name=file; filename=\"q\\\"uote\"\r\n\r\nD\r\n"
      "--x--\r\nepilogue";
  Collect c;
  MultipartReader r("x", &c);
  ASSERT_TRUE(r.Feed(body).ok());
  ASSERT_TRUE(r.Finish().ok());
  ASSERT_EQ(c.parts.size(), 2u);
  EXPECT_FALSE(c.parts[0].part.has_filename);
  EXPECT_EQ(c.parts[0].part.name, "note");
  EXPECT_EQ(c.parts[1].part.filename, "q\"uote");
  EXPECT_EQ(c.parts[1].data, "D");
}

TEST(Multipart, MalformedBodiesAreRefused) {
  auto refused = [](const std::string& body) {
    Collect c;
    MultipartReader r("x", &c);
    Status s = r.Feed(body);
    if (s.ok()) s = r.Finish();
    return !s.ok() && s.code() == Code::kInvalidRequest;
  };
  EXPECT_TRUE(refused(""));                                       // no delimiter at all
  EXPECT_TRUE(refused("--x\r\nContent-Disposition: form-data"));  // cut in the headers
  EXPECT_TRUE(refused("--x\r\nNoColonHere\r\n\r\nD\r\n--x--"));
  EXPECT_TRUE(refused("--x\r\nContent-Type: a/b\r\n\r\nD\r\n--x--"));  // no disposition
  EXPECT_TRUE(refused("--xyz"));                                       // junk after the boundary
  EXPECT_TRUE(refused("--x\r\nContent-Disposition: form-data; name=f\r\n\r\nno end"));
  // Headers over the cap, even if they never end.
  EXPECT_TRUE(refused("--x\r\nX-Long: " + std::string(MultipartReader::kMaxHeaderBytes + 10, 'a')));
  // Too many parts.
  std::string many;
  for (size_t i = 0; i <= MultipartReader::kMaxParts; ++i)
    many += "--x\r\nContent-Disposition: form-data; name=a\r\n\r\n\r\n";
  EXPECT_TRUE(refused(many + "--x--"));
}

TEST(Multipart, HandlerErrorsStopTheReading) {
  struct Refuse : Collect {
    Status OnPartData(std::string_view) override { return Status(Code::kNoSpace, "full"); }
  } h;
  MultipartReader r("x", &h);
  Status s =
      r.Feed("--x\r\nContent-Disposition: form-data; name=f; filename=a\r\n\r\nDATA-DATA\r\n--x--");
  EXPECT_EQ(s.code(), Code::kNoSpace);
}

}  // namespace
}  // namespace multipart_test
