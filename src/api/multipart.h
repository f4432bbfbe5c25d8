// A multipart/form-data body (RFC 7578, RFC 2046 section 5.1) read as it
// streams: parts' headers and their bytes are handed on piece by piece, so
// a 50 MiB upload never sits in memory. Small and capped: a boundary of 1
// to 70 characters, a part's headers under kMaxHeaderBytes, at most
// kMaxParts parts, and at most a delimiter's length held back between
// pieces.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kiln::api {

class MultipartReader {
 public:
  static constexpr size_t kMaxHeaderBytes = 16 << 10;
  static constexpr size_t kMaxParts = 1000;

  // What a part's headers say (Content-Disposition: form-data; name=...;
  // filename=...).
  struct Part {
    std::string name;
    std::string filename;
    bool has_filename = false;
    std::string content_type;
  };
  class Handler {
   public:
    virtual ~Handler() = default;
    virtual Status OnPartBegin(const Part& part) = 0;
    virtual Status OnPartData(std::string_view bytes) = 0;
    virtual Status OnPartEnd() = 0;
  };

  // The boundary a Content-Type names (multipart/form-data; boundary=...);
  // invalid_request when it is not multipart/form-data or names none.
  static Result<std::string> BoundaryOf(std::string_view content_type);

  MultipartReader(std::string boundary, Handler* handler);

  // The next piece of the body; an error (the handler's, or
  // invalid_request naming what is malformed) stops the reading.
  Status Feed(std::string_view bytes);
  // The body ended: an error unless its closing delimiter came.
  Status Finish();
  size_t parts() const { return parts_; }

 private:
  enum class State { kPreamble, kAfterDelimiter, kHeaders, kBody, kDone };
  Status Step(bool* progressed);
  Status ParseHeaders(std::string_view block, Part* part) const;

  std::string dash_boundary_;  // "--" boundary
  std::string delimiter_;      // CRLF "--" boundary
  Handler* handler_;
  State state_ = State::kPreamble;
  std::string buf_;
  size_t parts_ = 0;
};

}  // namespace kiln::api
