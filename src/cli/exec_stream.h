// Prints an exec's NDJSON events as they arrive: stdout/stderr data to the
// matching fd, warnings for lost output, and remembers how it ended.
// When a reader goes away (kiln … | head) it throws Interrupted(SIGPIPE):
// like a local pipeline, the command is ended rather than run on unread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kiln::cli {

class ExecStreamPrinter {
 public:
  ExecStreamPrinter(int stdout_fd, int stderr_fd) : out_fd_(stdout_fd), err_fd_(stderr_fd) {}

  void OnEvent(const nlohmann::json& event);

  // After the stream: the exit status to use, or throws the stream's error
  // event (ApiError) / ClientError when the stream ended without a verdict.
  int Finish() const;

  const std::optional<std::string>& process_id() const { return process_id_; }

 private:
  int out_fd_, err_fd_;
  std::optional<std::string> process_id_;
  std::optional<nlohmann::json> exit_, error_;
  std::uint64_t next_offset_ = 0;  // where the next chunk should start
};

}  // namespace kiln::cli
