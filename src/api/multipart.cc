// A streaming multipart/form-data reader (see multipart.h).
#include "api/multipart.h"
#include "common/strings.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace kiln::api {
namespace {

constexpr size_t kMaxBoundary = 70;  // RFC 2046

// `value; a=b; c="d \" e"` as its first item and its parameters (names
// lowercased, quoted strings unquoted). False when a quoted string is not
// closed.
bool SplitParams(std::string_view s, std::string* first,
                 std::map<std::string, std::string>* params) {
  size_t semi = s.find(';');
  *first = AsciiLower(TrimBlanks(s.substr(0, semi)));
  while (semi != std::string_view::npos) {
    s.remove_prefix(semi + 1);
    size_t eq = s.find('=');
    size_t next_semi = s.find(';');
    if (eq == std::string_view::npos || (next_semi != std::string_view::npos && next_semi < eq)) {
      semi = next_semi;  // a parameter without a value: skipped
      continue;
    }
    std::string name = AsciiLower(TrimBlanks(s.substr(0, eq)));
    s.remove_prefix(eq + 1);
    s = TrimBlanks(s);
    std::string value;
    if (!s.empty() && s.front() == '"') {
      size_t i = 1;
      for (; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\' && i + 1 < s.size()) ++i;
        value += s[i];
      }
      if (i >= s.size()) return false;
      s.remove_prefix(i + 1);
      semi = s.find(';');
    } else {
      semi = s.find(';');
      value = std::string(TrimBlanks(s.substr(0, semi)));
    }
    (*params)[name] = value;
  }
  return true;
}

}  // namespace

Result<std::string> MultipartReader::BoundaryOf(std::string_view content_type) {
  std::string type;
  std::map<std::string, std::string> params;
  if (!SplitParams(content_type, &type, &params))
    return Status(Code::kInvalidRequest, "Content-Type has an unclosed quoted string");
  if (type != "multipart/form-data")
    return Status(Code::kInvalidRequest,
                  "Content-Type must be multipart/form-data or application/octet-stream");
  auto it = params.find("boundary");
  if (it == params.end() || it->second.empty() || it->second.size() > kMaxBoundary)
    return Status(Code::kInvalidRequest, "Content-Type must name a boundary of 1 to 70 characters");
  return it->second;
}

MultipartReader::MultipartReader(std::string boundary, Handler* handler)
    : dash_boundary_("--" + boundary), delimiter_("\r\n--" + boundary), handler_(handler) {}

Status MultipartReader::Feed(std::string_view bytes) {
  if (state_ == State::kDone) return Status::Ok();  // the epilogue is ignored
  buf_.append(bytes);
  for (bool progressed = true; progressed;) {
    progressed = false;
    Status s = Step(&progressed);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status MultipartReader::Step(bool* progressed) {
  switch (state_) {
    case State::kPreamble: {
      size_t at = buf_.find(dash_boundary_);
      if (at == std::string::npos) {
        // The preamble is dropped; only what may start the boundary stays.
        size_t keep = dash_boundary_.size() - 1;
        if (buf_.size() > keep) buf_.erase(0, buf_.size() - keep);
        return Status::Ok();
      }
      buf_.erase(0, at + dash_boundary_.size());
      state_ = State::kAfterDelimiter;
      *progressed = true;
      return Status::Ok();
    }
    case State::kAfterDelimiter: {
      // Transport padding (spaces and tabs) may come before the CRLF.
      size_t i = 0;
      while (i < buf_.size() && (buf_[i] == ' ' || buf_[i] == '\t')) ++i;
      if (i > 256) return Status(Code::kInvalidRequest, "multipart: a delimiter line is too long");
      if (buf_.size() < i + 2) return Status::Ok();
      std::string_view two(buf_.data() + i, 2);
      if (two == "--") {
        state_ = State::kDone;
        buf_.clear();
        return Status::Ok();
      }
      if (two != "\r\n")
        return Status(Code::kInvalidRequest,
                      "multipart: a boundary must be followed by CRLF or by -- at the end");
      buf_.erase(0, i + 2);
      state_ = State::kHeaders;
      *progressed = true;
      return Status::Ok();
    }
    case State::kHeaders: {
      size_t end = buf_.starts_with("\r\n") ? 0 : buf_.find("\r\n\r\n");
      if (end == std::string::npos) {
        // Past the cap by more than a partial terminator: no end can come
        // in time (the same answer however the body was cut).
        if (buf_.size() > kMaxHeaderBytes + 3)
          return Status(Code::kInvalidRequest, "multipart: a part's headers are over " +
                                                   std::to_string(kMaxHeaderBytes) + " bytes");
        return Status::Ok();
      }
      if (end > kMaxHeaderBytes)
        return Status(Code::kInvalidRequest, "multipart: a part's headers are over " +
                                                 std::to_string(kMaxHeaderBytes) + " bytes");
      if (++parts_ > kMaxParts)
        return Status(Code::kInvalidRequest,
                      "multipart: more than " + std::to_string(kMaxParts) + " parts");
      Part part;
      Status s = ParseHeaders(std::string_view(buf_).substr(0, end), &part);
      if (!s.ok()) return s;
      buf_.erase(0, end == 0 ? 2 : end + 4);
      state_ = State::kBody;
      *progressed = true;
      return handler_->OnPartBegin(part);
    }
    case State::kBody: {
      size_t at = buf_.find(delimiter_);
      if (at == std::string::npos) {
        size_t keep = delimiter_.size() - 1;
        if (buf_.size() <= keep) return Status::Ok();
        size_t n = buf_.size() - keep;
        Status s = handler_->OnPartData(std::string_view(buf_).substr(0, n));
        buf_.erase(0, n);
        return s;
      }
      if (at > 0) {
        Status s = handler_->OnPartData(std::string_view(buf_).substr(0, at));
        if (!s.ok()) return s;
      }
      buf_.erase(0, at + delimiter_.size());
      state_ = State::kAfterDelimiter;
      *progressed = true;
      return handler_->OnPartEnd();
    }
    case State::kDone:
      return Status::Ok();
  }
  return Status::Ok();
}

Status MultipartReader::ParseHeaders(std::string_view block, Part* part) const {
  bool disposition = false;
  while (!block.empty()) {
    size_t eol = block.find("\r\n");
    std::string_view line = block.substr(0, eol);
    block.remove_prefix(eol == std::string_view::npos ? block.size() : eol + 2);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos)
      return Status(Code::kInvalidRequest, "multipart: a part's header line has no ':'");
    std::string name = AsciiLower(TrimBlanks(line.substr(0, colon)));
    std::string_view value = TrimBlanks(line.substr(colon + 1));
    if (name == "content-disposition") {
      std::string type;
      std::map<std::string, std::string> params;
      if (!SplitParams(value, &type, &params))
        return Status(Code::kInvalidRequest,
                      "multipart: Content-Disposition has an unclosed quoted string");
      disposition = true;
      part->name = params["name"];
      if (auto it = params.find("filename"); it != params.end()) {
        part->filename = it->second;
        part->has_filename = true;
      }
    } else if (name == "content-type") {
      part->content_type = std::string(value);
    }
  }
  if (!disposition)
    return Status(Code::kInvalidRequest, "multipart: a part has no Content-Disposition header");
  return Status::Ok();
}

Status MultipartReader::Finish() {
  if (state_ == State::kDone) return Status::Ok();
  return Status(Code::kInvalidRequest, "multipart: the body ended before its closing boundary");
}

}  // namespace kiln::api
