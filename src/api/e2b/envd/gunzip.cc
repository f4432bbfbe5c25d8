#include "api/e2b/envd/gunzip.h"

#include <string>

namespace kiln::api::e2b {
namespace {

// 16 + the largest window: gzip's header and trailer, not zlib's or raw.
constexpr int kGzipWindowBits = 16 + MAX_WBITS;
constexpr size_t kOutPiece = 64 << 10;

Status NotGzip(const z_stream& zs) {
  return Status(Code::kInvalidRequest,
                std::string("the body is not gzip (Content-Encoding: gzip): ") +
                    (zs.msg ? zs.msg : "bad data"));
}

}  // namespace

Gunzip::Gunzip(Sink sink) : sink_(std::move(sink)) { inflateInit2(&zs_, kGzipWindowBits); }

Gunzip::~Gunzip() { inflateEnd(&zs_); }

Status Gunzip::Feed(std::string_view compressed) {
  zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  zs_.avail_in = static_cast<uInt>(compressed.size());
  char out[kOutPiece];
  for (;;) {
    if (zs_.avail_in > 0) in_member_ = true;
    zs_.next_out = reinterpret_cast<Bytef*>(out);
    zs_.avail_out = sizeof out;
    int rc = inflate(&zs_, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) return NotGzip(zs_);
    size_t produced = sizeof out - zs_.avail_out;
    if (produced > 0)
      if (Status s = sink_(std::string_view(out, produced)); !s.ok()) return s;
    if (rc == Z_STREAM_END) {
      in_member_ = false;
      inflateReset(&zs_);  // keeps the input left: a next member, if any
    }
    // Done once the input is used up and zlib held nothing back (a full
    // piece may leave more inside it), or when it can make no progress.
    if (zs_.avail_in == 0 && produced < sizeof out) break;
    if (rc == Z_BUF_ERROR && produced == 0) break;
  }
  return Status::Ok();
}

Status Gunzip::Finish() {
  if (in_member_)
    return Status(Code::kInvalidRequest, "the gzip body ended before its last member's end");
  return Status::Ok();
}

}  // namespace kiln::api::e2b
