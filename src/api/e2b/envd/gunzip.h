// A gzip body inflated as it streams (envd's uploads with
// Content-Encoding: gzip): each piece in, what it expands to out, never the
// whole file in memory. Members one after another (as `cat a.gz b.gz`)
// inflate one after another, as gzip(1) reads them.
#pragma once

#include <zlib.h>

#include <functional>
#include <string_view>

#include "common/status.h"

namespace kiln::api::e2b {

class Gunzip {
 public:
  // Takes what the inflated bytes go to, a piece at a time; its error ends
  // the stream.
  using Sink = std::function<Status(std::string_view)>;

  explicit Gunzip(Sink sink);
  ~Gunzip();
  Gunzip(const Gunzip&) = delete;
  Gunzip& operator=(const Gunzip&) = delete;

  // invalid_request naming the body when it is not gzip.
  Status Feed(std::string_view compressed);
  // invalid_request when the body ended inside a member.
  Status Finish();

 private:
  Sink sink_;
  z_stream zs_{};
  bool in_member_ = false;  // some of a member read, not yet its end
};

}  // namespace kiln::api::e2b
