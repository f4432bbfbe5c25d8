// Fuzzes envd's readers of untrusted request bytes (src/api/e2b/envd): the
// Connect envelope reader and the streaming multipart reader. Each is fed
// the same body whole and in pieces of a size the input picks; they must
// agree (what a reader makes of a body cannot depend on how the network
// cut it), stay under their caps, and never crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/e2b/envd/connect.h"
#include "api/multipart.h"

namespace {

using kiln::Status;
using kiln::api::MultipartReader;
using kiln::api::e2b::connect::EnvelopeReader;

struct Events final : MultipartReader::Handler {
  std::vector<std::string> log;
  Status OnPartBegin(const MultipartReader::Part& p) override {
    log.push_back("begin " + p.name + "|" + p.filename + "|" + (p.has_filename ? "1" : "0"));
    log.push_back("");
    return Status::Ok();
  }
  Status OnPartData(std::string_view b) override {
    if (log.empty()) __builtin_trap();  // data before a part began
    log.back().append(b);
    return Status::Ok();
  }
  Status OnPartEnd() override {
    log.push_back("end");
    return Status::Ok();
  }
};

// The events and the final status of a multipart read in `piece`-byte feeds.
std::vector<std::string> ReadMultipart(std::string_view body, size_t piece) {
  Events e;
  MultipartReader r("fuzzb", &e);
  Status s;
  for (size_t i = 0; i < body.size() && s.ok(); i += piece) s = r.Feed(body.substr(i, piece));
  if (s.ok()) s = r.Finish();
  if (r.parts() > MultipartReader::kMaxParts + 1) __builtin_trap();
  e.log.push_back(s.ok() ? "ok" : "error");
  return e.log;
}

std::vector<std::string> ReadEnvelopes(std::string_view body, size_t piece) {
  EnvelopeReader r(4096);
  std::vector<std::string> out;
  for (size_t i = 0; i < body.size(); i += piece) {
    if (!r.Feed(body.substr(i, piece)).ok()) __builtin_trap();  // pieces are small here
    for (;;) {
      uint8_t flags = 0;
      std::string msg;
      Status err;
      auto got = r.Next(&flags, &msg, &err);
      if (got == EnvelopeReader::Got::kNeedMore) break;
      if (got == EnvelopeReader::Got::kError) {
        out.push_back("error");
        return out;
      }
      if (msg.size() > 4096) __builtin_trap();
      out.push_back(std::to_string(flags) + ":" + msg);
    }
  }
  out.push_back(r.Finish().ok() ? "ok" : "truncated");
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 60000) return 0;  // one Feed's worth of envelopes
  size_t piece = 1 + data[0] % 64;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (ReadMultipart(body, piece) != ReadMultipart(body, body.size() + 1)) __builtin_trap();
  if (ReadEnvelopes(body, piece) != ReadEnvelopes(body, 4096)) __builtin_trap();
  return 0;
}
