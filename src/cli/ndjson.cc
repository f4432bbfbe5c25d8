#include "cli/ndjson.h"

namespace kiln::cli {
namespace {

std::string StripCr(std::string line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

}  // namespace

std::vector<std::string> LineSplitter::Feed(std::string_view bytes) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t nl; (nl = bytes.find('\n', start)) != std::string_view::npos; start = nl + 1) {
    pending_.append(bytes.substr(start, nl - start));
    lines.push_back(StripCr(std::move(pending_)));
    pending_.clear();
  }
  pending_.append(bytes.substr(start));
  return lines;
}

std::optional<std::string> LineSplitter::Finish() {
  if (pending_.empty()) return std::nullopt;
  std::string tail = StripCr(std::move(pending_));
  pending_.clear();
  return tail;
}

}  // namespace kiln::cli
