// Synchronous HTTP/1.1 client for the daemon: one keep-alive connection,
// JSON calls, NDJSON streams and raw-byte transfers. Boost stays in the .cc.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/url.h"

namespace kiln::cli {

enum class Method { kGet, kPost, kPut, kDelete };

struct RequestOptions {
  // Deadline for the whole exchange (send + complete answer).
  std::chrono::milliseconds timeout = std::chrono::seconds(120);
  // A pending signal (see interrupt.h) aborts the request with Interrupted.
  bool interruptible = false;
  // Safe to resend when a reused keep-alive connection turns out closed
  // before any answer byte; false for calls that create things (unless
  // they carry an Idempotency-Key).
  bool idempotent = true;
  // Extra request headers, e.g. {"Prefer", "wait=120"}.
  std::vector<std::pair<std::string, std::string>> headers;
};

class HttpClient {
 public:
  HttpClient(ApiUrl url, std::optional<std::string> api_key);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  const ApiUrl& url() const;

  // Sends `body` as JSON (none when null) and parses the JSON answer.
  // Non-2xx answers throw ApiError; transport trouble throws
  // UnreachableError / ClientError.
  nlohmann::json Call(Method method, std::string_view target, const nlohmann::json* body,
                      const RequestOptions& options = {});

  // Like Call(), but the answer is NDJSON: `on_event` sees each line's JSON
  // as soon as it arrives. Exceptions from `on_event` end the stream.
  void Stream(Method method, std::string_view target, const nlohmann::json& body,
              const RequestOptions& options,
              const std::function<void(const nlohmann::json&)>& on_event);

  // Raw bytes out (e.g. file content), handed to `sink` piece by piece.
  void Download(std::string_view target, const RequestOptions& options,
                const std::function<void(std::string_view)>& sink);

  // Raw bytes in (application/octet-stream); the answer is JSON.
  nlohmann::json Upload(Method method, std::string_view target, std::string bytes,
                        const RequestOptions& options = {});
  // Like Upload(), with the body streamed from the file at `path` (never
  // read whole: a snapshot's tar may be gigabytes).
  nlohmann::json UploadFile(Method method, std::string_view target, const std::string& path,
                            const RequestOptions& options = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::cli
