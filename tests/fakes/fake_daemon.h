// Test-only: a canned kiln daemon (an HTTP server on a loopback port) and the
// socket helpers it shares with the HTTP client tests.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace kiln::testutil {

// A socket listening on 127.0.0.1 at a free port; stores the port in *port.
inline int ListenOnLoopback(int backlog, int* port) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::listen(listener, backlog), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return listener;
}

// Test scaffolding only: header block plus a Content-Length body.
inline bool ReadRequest(int fd, std::string& buffered, std::string& request) {
  char buf[4096];
  for (;;) {
    auto end = buffered.find("\r\n\r\n");
    if (end != std::string::npos) {
      std::size_t length = 0;
      auto cl = buffered.find("Content-Length: ");
      if (cl != std::string::npos && cl < end) length = std::stoul(buffered.substr(cl + 16));
      if (buffered.size() >= end + 4 + length) {
        request = buffered.substr(0, end + 4 + length);
        buffered.erase(0, end + 4 + length);
        return true;
      }
    }
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return false;
    buffered.append(buf, static_cast<std::size_t>(n));
  }
}

// One canned answer; status 0 drops the connection without answering.
struct Canned {
  int status;
  std::string body;
  std::chrono::milliseconds delay{0};
};

// Answers requests, over as many connections as the client opens (each
// kiln run has its own), with the canned answers in order.
class CannedServer {
 public:
  explicit CannedServer(std::vector<Canned> answers) : answers_(std::move(answers)) {
    listener_ = ListenOnLoopback(4, &port_);
    thread_ = std::thread([this] { Serve(); });
  }
  ~CannedServer() {
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  void Serve() {
    std::size_t next = 0;
    while (next < answers_.size()) {
      int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      std::string buffered, request;
      while (next < answers_.size() && ReadRequest(fd, buffered, request)) {
        {
          std::lock_guard lock(mu_);
          requests_.push_back(request);
        }
        const Canned& a = answers_[next++];
        std::this_thread::sleep_for(a.delay);
        if (a.status == 0) break;
        std::string answer = "HTTP/1.1 " + std::to_string(a.status) +
                             " X\r\nContent-Type: application/json\r\nContent-Length: " +
                             std::to_string(a.body.size()) + "\r\n\r\n" + a.body;
        ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
      }
      ::close(fd);
    }
  }

  std::vector<Canned> answers_;
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_;
};

}  // namespace kiln::testutil
