// kilnd's HTTP/1.1 server (Boost.Beast, synchronous, a thread per
// connection). Threads keep handlers simple -- an exec handler just blocks
// on its sandbox's answer -- and one slow command never holds up another.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::api {

class Connection;

// One request and its response, as a handler sees them.
class Exchange {
 public:
  virtual ~Exchange() = default;

  virtual const std::string& method() const = 0;
  virtual const std::string& path() const = 0;
  virtual std::optional<std::string> Query(const std::string& name) const = 0;
  virtual std::vector<std::string> QueryAll(const std::string& name) const = 0;
  virtual std::string Header(const std::string& name) const = 0;
  virtual const std::string& request_id() const = 0;
  virtual std::optional<uint64_t> content_length() const = 0;

  // The whole body as JSON ({} when empty). Throws ApiError on bad JSON or
  // a body over max_bytes.
  virtual nlohmann::json JsonBody(size_t max_bytes = 8 << 20) = 0;
  // Streams the raw body; false at its end (or on a broken connection,
  // then body_error() is true).
  virtual bool ReadBodyChunk(std::string* out) = 0;
  virtual bool body_error() const = 0;

  virtual void SendJson(int status, const nlohmann::json& body) = 0;
  virtual void SendBytes(int status, std::string_view body, const std::string& content_type,
                         const std::vector<std::pair<std::string, std::string>>& headers = {}) = 0;
  // Chunked streaming answer. Write* return false once the client is gone.
  virtual bool BeginStream(
      int status, const std::string& content_type,
      const std::vector<std::pair<std::string, std::string>>& headers = {}) = 0;
  virtual bool WriteChunk(std::string_view data) = 0;
  virtual void EndStream() = 0;
  // Ends the connection without the last chunk: the client sees a broken
  // transfer rather than a short one.
  virtual void AbortStream() = 0;
  virtual bool responded() const = 0;
  // True once the client has closed its end (it will never read an answer).
  virtual bool ClientGone() = 0;

  std::map<std::string, std::string> params;  // path parameters, from the router
};

using Handler = std::function<void(Exchange&)>;

class HttpServer {
 public:
  // `listen` is host:port.
  HttpServer(const std::string& listen, Handler handler);
  ~HttpServer();
  // Binds and serves until Stop(); throws on a bind failure.
  void Run();
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::api
