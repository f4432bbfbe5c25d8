// Error kinds the CLI reports; main() turns each into a message and an exit code.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

namespace kiln::cli {

// Bad command line: always raised before any request is sent.
struct UsageError : std::runtime_error {
  explicit UsageError(const std::string& message, std::string hint = "")
      : std::runtime_error(message), hint(std::move(hint)) {}
  std::string hint;  // e.g. "see `kiln sandbox run --help`"
};

// The daemon answered with an error; `body` is its {"error": {...}} object.
struct ApiError : std::runtime_error {
  ApiError(unsigned status, std::string code, std::string message, nlohmann::json body);
  unsigned status;
  std::string code;
  nlohmann::json body;
};

// Nothing listens at the daemon address (or the name does not resolve).
struct UnreachableError : std::runtime_error {
  explicit UnreachableError(std::string url);
  std::string url;
};

// Trouble on our side of the API: the connection broke or timed out, an
// answer made no sense, a sandbox never reached "running".
struct ClientError : std::runtime_error {
  ClientError(std::string code, std::string message);
  std::string code;  // "timeout", "connection_lost", "bad_response", "start_failed"
};

// A signal (Ctrl-C) cut an interruptible request short, or the reader of
// the command's output went away (signal = SIGPIPE).
struct Interrupted : std::runtime_error {
  explicit Interrupted(int signal);
  int signal;
};

// Builds the ApiError for a non-2xx answer; copes with bodies that are not
// the documented {"error": {...}} shape (proxies, older daemons).
ApiError MakeApiError(unsigned status, std::string_view body);

}  // namespace kiln::cli
