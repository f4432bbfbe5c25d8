// Test-only: just enough of a kiln::api::Exchange to dispatch a request (a
// method and a path) and keep the status and JSON body it is answered with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/http_server.h"

namespace kiln::testutil {

class FakeExchange : public api::Exchange {
 public:
  using json = nlohmann::json;

  FakeExchange() = default;
  FakeExchange(std::string method, std::string path)
      : method_(std::move(method)), path_(std::move(path)) {}

  const std::string& method() const override { return method_; }
  const std::string& path() const override { return path_; }
  std::optional<std::string> Query(const std::string&) const override { return std::nullopt; }
  std::vector<std::string> QueryAll(const std::string&) const override { return {}; }
  std::string Header(const std::string& name) const override {
    for (const auto& [k, v] : headers_)
      if (k == name) return v;
    return "";
  }
  const std::string& request_id() const override { return request_id_; }
  std::optional<uint64_t> content_length() const override { return std::nullopt; }
  json JsonBody(size_t) override { return json::object(); }
  bool ReadBodyChunk(std::string*) override { return false; }
  bool body_error() const override { return false; }
  void SendJson(int status, const json& body) override {
    std::string text = body.dump();
    RunBeforeAnswer(status, &text);
    status_ = status;
    body_ = body;
  }
  void SendBytes(int status, std::string_view, const std::string&,
                 const std::vector<std::pair<std::string, std::string>>&) override {
    RunBeforeAnswer(status, nullptr);
    status_ = status;
  }
  bool BeginStream(int status, const std::string&,
                   const std::vector<std::pair<std::string, std::string>>&) override {
    RunBeforeAnswer(status, nullptr);
    status_ = status;
    return true;
  }
  bool WriteChunk(std::string_view) override { return true; }
  void EndStream() override {}
  void AbortStream() override {}
  bool responded() const override { return status_ != 0; }
  bool ClientGone() override { return false; }

  int status_ = 0;
  json body_;
  std::vector<std::pair<std::string, std::string>> headers_;  // request headers

 private:
  std::string method_, path_, request_id_ = "req-test";
};

}  // namespace kiln::testutil
