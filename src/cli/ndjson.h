// Splits a byte stream into lines; HTTP chunks need not end on a newline.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::cli {

class LineSplitter {
 public:
  // Appends bytes; returns the lines completed by them (without "\n" or "\r\n").
  std::vector<std::string> Feed(std::string_view bytes);
  // The unterminated tail once the stream has ended, if any.
  std::optional<std::string> Finish();

 private:
  std::string pending_;
};

}  // namespace kiln::cli
