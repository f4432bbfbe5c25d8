// envd's gzip'ed uploads: inflated a piece at a time, whatever the pieces.
#include "api/e2b/envd/gunzip.h"

#include <zlib.h>

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace kiln::api::e2b {
namespace gunzip_test {
namespace {

std::string Compress(const std::string& data) {
  z_stream zs{};
  deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, data.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// `gz` fed in pieces of `piece` bytes; what came out, or the error.
Result<std::string> Inflate(const std::string& gz, size_t piece) {
  std::string got;
  Gunzip gunzip([&](std::string_view bytes) {
    got.append(bytes);
    return Status::Ok();
  });
  for (size_t at = 0; at < gz.size(); at += piece)
    if (Status s = gunzip.Feed(std::string_view(gz).substr(at, piece)); !s.ok()) return s;
  if (Status s = gunzip.Finish(); !s.ok()) return s;
  return got;
}

TEST(Gunzip, InflatesWhateverThePieces) {
  std::mt19937 rng(7);
  std::string data(300000, '\0');
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = i < 100000 ? static_cast<char>(rng()) : 'a';  // random, then very compressible
  std::string gz = Compress(data);
  for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}, gz.size()}) {
    auto got = Inflate(gz, piece);
    ASSERT_TRUE(got.ok()) << piece << ": " << got.status().message();
    EXPECT_EQ(*got, data) << piece;
  }
}

TEST(Gunzip, MembersOneAfterAnotherAreOneStream) {
  auto got = Inflate(Compress("one ") + Compress("two"), 3);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "one two");
}

TEST(Gunzip, RefusesWhatIsNotGzipOrIsCut) {
  auto bad = Inflate("this is not gzip at all", 5);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidRequest);
  EXPECT_NE(bad.status().message().find("not gzip"), std::string::npos);
  std::string gz = Compress(std::string(1000, 'x'));
  auto cut = Inflate(gz.substr(0, gz.size() - 8), 100);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("ended before"), std::string::npos);
  auto empty = Inflate("", 1);
  EXPECT_TRUE(empty.ok() && empty->empty());
}

TEST(Gunzip, TheSinksErrorEndsIt) {
  std::string gz = Compress(std::string(200000, 'y'));
  int calls = 0;
  Gunzip gunzip([&](std::string_view) {
    ++calls;
    return Status(Code::kNoSpace, "disk full");
  });
  Status s = gunzip.Feed(gz);
  EXPECT_EQ(s.code(), Code::kNoSpace);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace gunzip_test
}  // namespace kiln::api::e2b
