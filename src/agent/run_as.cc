#include "agent/run_as.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

namespace kiln::agent {

namespace {

RunAs Load() {
  RunAs r;
  const char* text = std::getenv("KILN_RUN_AS");
  if (!text) return r;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return r;
  r.uid = j.value("uid", r.uid);
  r.gid = j.value("gid", r.gid);
  r.user = j.value("user", r.user);
  r.home = j.value("home", r.home);
  r.workdir = j.value("workdir", r.workdir);
  if (j.contains("env") && j["env"].is_array()) r.env = j["env"].get<std::vector<std::string>>();
  // PID 1 must not hand its own variable down to every command.
  unsetenv("KILN_RUN_AS");
  return r;
}

}  // namespace

const RunAs& TheRunAs() {
  static const RunAs run_as = Load();
  return run_as;
}

std::string Shell() {
  // Looked up each time: a command may install bash.
  if (access("/bin/bash", X_OK) == 0) return "/bin/bash";
  if (access("/bin/sh", X_OK) == 0) return "/bin/sh";
  return "";
}

namespace {

bool Accepts(int family, int port) {
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int rc;
  if (family == AF_INET) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    a.sin6_addr = in6addr_loopback;
    rc = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  close(fd);
  return rc == 0;
}

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

int WaitForPort(int port, int64_t timeout_ms) {
  if (port <= 0 || port > 65535) return 2;
  int64_t end = NowMs() + timeout_ms;
  for (;;) {
    if (Accepts(AF_INET, port) || Accepts(AF_INET6, port)) return 0;
    if (NowMs() >= end) return 1;
    usleep(50000);
  }
}

}  // namespace kiln::agent
