// Prints an exec's NDJSON events as they arrive: stdout/stderr data to the
// matching fd, warnings for lost output, and remembers how it ended.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kiln::cli {

class ExecStreamPrinter {
 public:
  ExecStreamPrinter(int stdout_fd, int stderr_fd) : out_fd_(stdout_fd), err_fd_(stderr_fd) {}

  void on_event(const nlohmann::json& event);

  // After the stream: the exit status to use, or throws the stream's error
  // event (ApiError) / ClientError when the stream ended without a verdict.
  int finish() const;

  const std::optional<std::string>& process_id() const { return process_id_; }

 private:
  void write_output(int fd, bool& open, const std::string& bytes);

  int out_fd_, err_fd_;
  bool out_open_ = true, err_open_ = true;  // false once the reader went away
  std::optional<std::string> process_id_;
  std::optional<nlohmann::json> exit_, error_;
  std::uint64_t next_offset_ = 0;  // where the next chunk should start
};

}  // namespace kiln::cli
