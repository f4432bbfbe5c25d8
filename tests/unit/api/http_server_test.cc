// HttpServer over real loopback sockets: what a client that floods, never
// reads or goes silent can make the server hold (api/beast_websocket.h), and
// the JSON body cap of a route after the body was read under a larger one.
#include "api/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "api/errors.h"

namespace kiln::api {
namespace http_server_test {
namespace {

using Clock = std::chrono::steady_clock;

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A server on loopback serving `handler` until the test ends.
class Served {
 public:
  Served(Handler handler, ServerLimits limits)
      : port_(FreePort()),
        server_("127.0.0.1:" + std::to_string(port_), std::move(handler), limits) {
    server_.Listen();
    thread_ = std::thread([this] { server_.Run(); });
  }
  ~Served() {
    server_.Stop();
    thread_.join();
    server_.Drain(5000);
  }
  // A connected client socket with a small receive buffer (it reads little).
  int Connect(int rcvbuf = 4096) const {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port_));
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
  }

 private:
  int port_;
  HttpServer server_;
  std::thread thread_;
};

void SendAll(int fd, const std::string& s) {
  ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
}

// Reads until the end of the response head; what came with it.
std::string ReadHead(int fd) {
  std::string got;
  char c;
  while (got.find("\r\n\r\n") == std::string::npos && ::recv(fd, &c, 1, 0) == 1) got += c;
  return got;
}

void Upgrade(int fd) {
  SendAll(fd,
          "GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
  ASSERT_EQ(ReadHead(fd).rfind("HTTP/1.1 101", 0), 0u);
}

// One masked client frame (mask 0: the payload goes as it is).
std::string Frame(uint8_t opcode, const std::string& payload) {
  std::string f;
  f += static_cast<char>(0x80 | opcode);
  f += static_cast<char>(0x80 | payload.size());  // < 126
  f += std::string(4, '\0');
  return f + payload;
}

// Whether the server ended the connection within `seconds`: a send fails or
// the socket reads to its end (bytes before that are dropped).
bool CutWithin(int fd, int seconds, const std::string& keep_sending) {
  auto deadline = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < deadline) {
    if (!keep_sending.empty() &&
        ::send(fd, keep_sending.data(), keep_sending.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
        errno != EAGAIN && errno != EWOULDBLOCK)
      return true;
    pollfd p{fd, POLLRDHUP, 10};
    if (::poll(&p, 1, 10) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) return true;
  }
  return false;
}

TEST(HttpServerWebSocketTest, RepliesPiledUpByTheClientsOwnFramesCutIt) {
  std::atomic<bool> run_returned{false};
  Served s(
      [&](Exchange& ex) {
        auto ws = ex.UpgradeToWebSocket();
        ASSERT_TRUE(ws);
        ws->Run([&](std::string_view, bool) {
          // Every frame makes a 4 KiB reply, sent from the socket's own thread.
          ws->Send(std::string(4096, 'r'), true);
        });
        run_returned = true;
      },
      ServerLimits{});
  int fd = s.Connect();
  Upgrade(fd);
  // Never reads; sends as fast as the server takes them: without the cap,
  // the replies grow without bound (issue 42: 8 GiB in 40 s).
  std::string burst;
  for (int i = 0; i < 256; ++i) burst += Frame(0x2, std::string("o\0\0\0\x01", 5));
  EXPECT_TRUE(CutWithin(fd, 20, burst));
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!run_returned && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(run_returned);
  ::close(fd);
}

TEST(HttpServerWebSocketTest, AClientThatSendsNothingAndAnswersNoPingIsCut) {
  std::atomic<bool> run_returned{false};
  ServerLimits limits;
  limits.websocket_idle_s = 2;
  Served s(
      [&](Exchange& ex) {
        auto ws = ex.UpgradeToWebSocket();
        ASSERT_TRUE(ws);
        ws->Run([](std::string_view, bool) {});
        run_returned = true;
      },
      limits);
  int fd = s.Connect();
  Upgrade(fd);
  auto t0 = Clock::now();
  EXPECT_TRUE(CutWithin(fd, 10, ""));
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(1500));
  ::close(fd);
}

TEST(HttpServerWebSocketTest, OutputToAClientThatNeverReadsGivesUpAtTheWriteDeadline) {
  std::atomic<bool> sender_gave_up{false};
  ServerLimits limits;
  limits.request_timeout_s = 2;  // the write deadline
  Served s(
      [&](Exchange& ex) {
        auto ws = ex.UpgradeToWebSocket();
        ASSERT_TRUE(ws);
        std::thread pump([&] {
          // A terminal's output: another thread, as fast as it is let.
          for (int i = 0; i < 100000; ++i)
            if (!ws->Send(std::string(64 * 1024, 'o'), true)) break;
          sender_gave_up = true;
        });
        ws->Run([](std::string_view, bool) {});
        pump.join();
      },
      limits);
  int fd = s.Connect();
  Upgrade(fd);
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!sender_gave_up && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(sender_gave_up) << "a client that reads nothing held the sender";
  ::close(fd);
}

TEST(HttpServerBodyTest, ARoutesCapHoldsAfterTheBodyWasReadUnderALargerOne) {
  Served s(
      [](Exchange& ex) {
        try {
          ex.JsonBody(16 << 20);  // as the idempotency layer reads it
          ex.JsonBody(1024);      // the route's own cap
          ex.SendJson(200, nlohmann::json::object());
        } catch (const ApiError& e) {
          ex.SendJson(e.http_status(), nlohmann::json{{"code", CodeName(e.status().code())}});
        }
      },
      ServerLimits{});
  int fd = s.Connect(1 << 20);
  std::string body = "{\"pad\":\"" + std::string(4096, 'x') + "\"}";
  SendAll(fd, "POST /t HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body);
  std::string head = ReadHead(fd);
  EXPECT_EQ(head.rfind("HTTP/1.1 413", 0), 0u) << head;
  ::close(fd);
}

}  // namespace
}  // namespace http_server_test
}  // namespace kiln::api
