// kiln CLI: HttpClient against a scripted in-process server (raw sockets,
// canned answers), covering keep-alive, NDJSON streams, errors, timeouts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <functional>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "cli/errors.h"
#include "cli/http_client.h"
#include "cli/interrupt.h"
#include "fakes/fake_daemon.h"

namespace kiln::cli {
namespace cli_http_test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// Answers each request with the pieces `respond` returns, written with a
// short pause between them so the client sees separate TCP segments.
class FakeServer {
 public:
  struct Answer {
    std::vector<std::string> pieces;
    bool close_after = false;  // drop the connection without saying so
    bool hang = false;         // never answer
  };
  using Responder = std::function<Answer(const std::string& request)>;

  explicit FakeServer(Responder respond) : respond_(std::move(respond)) {
    listener_ = testutil::ListenOnLoopback(8, &port_);
    thread_ = std::thread([this] { Serve(); });
  }

  ~FakeServer() {
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    thread_.join();
  }

  ApiUrl url(const std::string& prefix = "") const {
    return ParseApiUrl("http://127.0.0.1:" + std::to_string(port_) + prefix);
  }
  std::vector<std::string> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  int connections() {
    std::lock_guard lock(mu_);
    return connections_;
  }

 private:
  void Serve() {
    for (;;) {
      int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      {
        std::lock_guard lock(mu_);
        ++connections_;
      }
      ServeConnection(fd);
      ::close(fd);
    }
  }

  void ServeConnection(int fd) {
    std::string buffered;
    for (;;) {
      std::string request;
      if (!testutil::ReadRequest(fd, buffered, request)) return;
      {
        std::lock_guard lock(mu_);
        requests_.push_back(request);
      }
      Answer a = respond_(request);
      if (a.hang) {
        char c;
        while (::read(fd, &c, 1) > 0) {
        }
        return;
      }
      for (const auto& piece : a.pieces) {
        if (::send(fd, piece.data(), piece.size(), MSG_NOSIGNAL) < 0) return;
        std::this_thread::sleep_for(5ms);
      }
      if (a.close_after) return;
    }
  }

  Responder respond_;
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_;
  int connections_ = 0;
};

std::string JsonAnswer(int status, const std::string& body, const std::string& reason = "OK") {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

std::string Chunk(const std::string& data) {
  char size[16];
  std::snprintf(size, sizeof size, "%zx", data.size());
  return std::string(size) + "\r\n" + data + "\r\n";
}

const std::string kChunkedHead =
    "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n";

TEST(CliHttp, CallSendsJsonAndHeaders) {
  FakeServer server([](const std::string&) {
    return FakeServer::Answer{{JsonAnswer(200, R"({"id":"sbx_1","state":"running"})")}};
  });
  HttpClient client(server.url("/api"), "secret");
  json body = {{"vcpu", 2}};
  json answer = client.Call(Method::kPost, "/v1/sandboxes", &body);
  EXPECT_EQ(answer["id"], "sbx_1");
  ASSERT_EQ(server.requests().size(), 1u);
  const std::string req = server.requests()[0];
  EXPECT_EQ(req.rfind("POST /api/v1/sandboxes HTTP/1.1\r\n", 0), 0u) << req;
  EXPECT_NE(req.find("Authorization: Bearer secret\r\n"), std::string::npos);
  EXPECT_NE(req.find("Content-Type: application/json\r\n"), std::string::npos);
  EXPECT_NE(req.find("\r\n\r\n{\"vcpu\":2}"), std::string::npos);
}

TEST(CliHttp, KeepsTheConnectionAlive) {
  FakeServer server([](const std::string&) { return FakeServer::Answer{{JsonAnswer(200, "{}")}}; });
  HttpClient client(server.url(), std::nullopt);
  for (int i = 0; i < 3; ++i) client.Call(Method::kGet, "/v1/health", nullptr);
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(server.requests()[0].find("Authorization"), std::string::npos);
}

TEST(CliHttp, ResendsIdempotentCallsWhenTheServerDroppedTheConnection) {
  FakeServer server([](const std::string&) {
    return FakeServer::Answer{{JsonAnswer(200, "{}")}, /*close_after=*/true};
  });
  HttpClient client(server.url(), std::nullopt);
  client.Call(Method::kGet, "/v1/health", nullptr);
  std::this_thread::sleep_for(50ms);  // let the close land
  EXPECT_NO_THROW(client.Call(Method::kGet, "/v1/health", nullptr));
  EXPECT_EQ(server.connections(), 2);
}

TEST(CliHttp, NeverResendsCallsThatCreateThings) {
  FakeServer server([](const std::string&) {
    return FakeServer::Answer{{JsonAnswer(200, "{}")}, /*close_after=*/true};
  });
  HttpClient client(server.url(), std::nullopt);
  client.Call(Method::kGet, "/v1/health", nullptr);
  std::this_thread::sleep_for(50ms);
  RequestOptions once;
  once.idempotent = false;
  const json body = json::object();
  EXPECT_THROW(client.Call(Method::kPost, "/v1/sandboxes", &body, once), ClientError);
  EXPECT_EQ(server.requests().size(), 1u);
  // The next call starts over on a fresh connection.
  EXPECT_NO_THROW(client.Call(Method::kGet, "/v1/health", nullptr));
}

TEST(CliHttp, ErrorAnswerBecomesApiError) {
  FakeServer server([](const std::string&) {
    return FakeServer::Answer{{JsonAnswer(
        404,
        R"({"error":{"code":"not_found","status":404,"message":"no sandbox x","requestId":"r"}})",
        "Not Found")}};
  });
  HttpClient client(server.url(), std::nullopt);
  try {
    client.Call(Method::kGet, "/v1/sandboxes/x", nullptr);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 404u);
    EXPECT_EQ(e.code, "not_found");
    EXPECT_STREQ(e.what(), "no sandbox x");
  }
  // The connection stays usable after an error answer.
  EXPECT_THROW(client.Call(Method::kGet, "/v1/sandboxes/x", nullptr), ApiError);
  EXPECT_EQ(server.connections(), 1);
}

TEST(CliHttp, StreamsNdjsonAcrossChunkBoundaries) {
  FakeServer server([](const std::string&) {
    return FakeServer::Answer{{kChunkedHead, Chunk("{\"type\":\"start\",\"proc"),
                               Chunk("essId\":\"p1\"}\n{\"type\":\"stdout\",\"data\":\"a\"}\n\n"),
                               Chunk("{\"type\":\"exit\",\"exitCode\":0}"), Chunk("\n"),
                               Chunk("")}};
  });
  HttpClient client(server.url(), std::nullopt);
  std::vector<std::string> types;
  client.Stream(Method::kPost, "/v1/sandboxes/s:exec", json{{"argv", {"x"}}}, {},
                [&](const json& e) { types.push_back(e["type"]); });
  EXPECT_EQ(types, (std::vector<std::string>{"start", "stdout", "exit"}));
  EXPECT_NE(server.requests()[0].find("Accept: application/x-ndjson"), std::string::npos);
  // Fully read: the connection is reused.
  client.Stream(Method::kPost, "/v1/sandboxes/s:exec", json{{"argv", {"x"}}}, {},
                [](const json&) {});
  EXPECT_EQ(server.connections(), 1);
}

TEST(CliHttp, StreamErrorAnswerBeforeAnyEvent) {
  FakeServer server([](const std::string&) {
    return FakeServer::Answer{{JsonAnswer(
        409, R"({"error":{"code":"not_running","status":409,"message":"stopped"}})", "Conflict")}};
  });
  HttpClient client(server.url(), std::nullopt);
  EXPECT_THROW(client.Stream(Method::kPost, "/x", json::object(), {}, [](const json&) {}),
               ApiError);
}

TEST(CliHttp, StreamCutShortIsAnError) {
  FakeServer server([](const std::string&) {
    return FakeServer::Answer{{kChunkedHead, Chunk("{\"type\":\"start\"}\n")}, true};
  });
  HttpClient client(server.url(), std::nullopt);
  int events = 0;
  EXPECT_THROW(
      client.Stream(Method::kPost, "/x", json::object(), {}, [&](const json&) { ++events; }),
      ClientError);
  EXPECT_EQ(events, 1);
}

TEST(CliHttp, BadStreamLineIsAnError) {
  FakeServer server([](const std::string&) {
    return FakeServer::Answer{{kChunkedHead, Chunk("not json\n"), Chunk("")}};
  });
  HttpClient client(server.url(), std::nullopt);
  EXPECT_THROW(client.Stream(Method::kPost, "/x", json::object(), {}, [](const json&) {}),
               ClientError);
}

TEST(CliHttp, DownloadAndUploadRawBytes) {
  const std::string bytes("\x00\x01\xff\r\n", 5);
  FakeServer server([&](const std::string& req) {
    if (req.rfind("GET", 0) == 0) {
      return FakeServer::Answer{
          {"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
           "Transfer-Encoding: chunked\r\n\r\n",
           Chunk(bytes.substr(0, 2)), Chunk(bytes.substr(2)), Chunk("")}};
    }
    return FakeServer::Answer{{JsonAnswer(200, R"({"path":"/f","size":5})")}};
  });
  HttpClient client(server.url(), std::nullopt);
  std::string got;
  client.Download("/v1/sandboxes/s/files/content?path=%2Ff", {},
                  [&](std::string_view s) { got.append(s); });
  EXPECT_EQ(got, bytes);
  json answer = client.Upload(Method::kPut, "/v1/sandboxes/s/files/content?path=%2Ff", bytes);
  EXPECT_EQ(answer["size"], 5);
  const std::string put = server.requests()[1];
  EXPECT_NE(put.find("Content-Type: application/octet-stream"), std::string::npos);
  EXPECT_EQ(put.substr(put.size() - 5), bytes);
}

TEST(CliHttp, NobodyListening) {
  ApiUrl url;
  {
    FakeServer gone([](const std::string&) { return FakeServer::Answer{}; });
    url = gone.url();
  }
  HttpClient client(url, std::nullopt);
  try {
    client.Call(Method::kGet, "/v1/health", nullptr);
    FAIL();
  } catch (const UnreachableError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot reach the kiln daemon at " + url.display + " (is `kiln server` running?)");
  }
}

TEST(CliHttp, Timeout) {
  FakeServer server([](const std::string&) {
    FakeServer::Answer a;
    a.hang = true;
    return a;
  });
  HttpClient client(server.url(), std::nullopt);
  RequestOptions options;
  options.timeout = 300ms;
  try {
    client.Call(Method::kGet, "/v1/health", nullptr, options);
    FAIL();
  } catch (const ClientError& e) {
    EXPECT_EQ(e.code, "timeout");
  }
}

TEST(CliHttp, InterruptAbortsAnInterruptibleStream) {
  FakeServer server([](const std::string&) {
    FakeServer::Answer a;
    a.pieces = {kChunkedHead, Chunk("{\"type\":\"start\"}\n")};
    a.close_after = false;
    return a;  // then silence: the stream stays open
  });
  InstallInterruptHandlers();
  HttpClient client(server.url(), std::nullopt);
  RequestOptions options;
  options.interruptible = true;
  try {
    client.Stream(Method::kPost, "/x", json::object(), options,
                  [](const json&) { std::raise(SIGINT); });
    FAIL();
  } catch (const Interrupted& e) {
    EXPECT_EQ(e.signal, SIGINT);
  }
  ClearInterrupt();
  std::signal(SIGINT, SIG_DFL);
}

}  // namespace
}  // namespace cli_http_test
}  // namespace kiln::cli
