#include "agent/sudo.h"

#include "agent/run_as.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/command.h"
#include "agent/spawn.h"

extern char** environ;

namespace kiln::agent {

using nlohmann::json;

namespace {

constexpr size_t kMaxRequest = 1 << 20;
bool sudo_allowed = true;  // the agent is one thread: no lock needed

sockaddr_un SocketAddress() {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, kSudoSocket, sizeof addr.sun_path - 1);
  return addr;
}

// The request's first message: its u32 length, with room for the caller's
// three stdio descriptors (SCM_RIGHTS) beside it.
struct StdioMessage {
  uint32_t len = 0;
  char control[CMSG_SPACE(3 * sizeof(int))] = {};
  iovec iov{&len, sizeof len};
  msghdr msg{};
  StdioMessage() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
};

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

struct SudoServer::Client {
  UniqueFd conn;
  pid_t pid = -1;
};

SudoServer::SudoServer(EventLoop& loop, CommandRegistry& registry)
    : loop_(loop), registry_(registry) {}

SudoServer::~SudoServer() {
  if (listener_) loop_.Remove(listener_.get());
}

bool SudoServer::Listen() {
  mkdir("/run", 0755);
  mkdir("/run/kiln", 0755);
  ::unlink(kSudoSocket);
  listener_.reset(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  sockaddr_un addr = SocketAddress();
  if (!listener_ || bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0 ||
      listen(listener_.get(), 64) < 0) {
    std::fprintf(stderr, "kiln-agent: sudo socket: %s\n", std::strerror(errno));
    return false;
  }
  chmod(kSudoSocket, 0666);
  loop_.Add(listener_.get(), EPOLLIN, [this](uint32_t) { OnAccept(); });
  return true;
}

void SudoServer::OnAccept() {
  for (;;) {
    UniqueFd conn(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) return;
    Serve(std::move(conn));
  }
}

void SudoServer::Serve(UniqueFd conn) {
  // The client writes its whole request at once, right after connecting.
  timeval tv{2, 0};
  setsockopt(conn.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  // Request: u32 length, then that many bytes of JSON; the first message
  // carries the caller's stdin, stdout and stderr.
  int fds[3] = {-1, -1, -1};
  StdioMessage m;
  uint32_t& len = m.len;
  msghdr& msg = m.msg;
  ssize_t n = recvmsg(conn.get(), &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len >= CMSG_LEN(sizeof fds))
      std::memcpy(fds, CMSG_DATA(c), sizeof fds);
  }
  UniqueFd in(fds[0]), out(fds[1]), err(fds[2]);
  if (n != sizeof len || len > kMaxRequest || !in || !out || !err) {
    std::fprintf(stderr, "kiln-agent: malformed sudo request\n");
    return;
  }
  std::string body(len, '\0');
  size_t got = 0;
  while (got < len) {
    ssize_t m = ::read(conn.get(), body.data() + got, len - got);
    if (m < 0 && errno == EINTR) continue;
    if (m <= 0) return;
    got += static_cast<size_t>(m);
  }
  json req = json::parse(body, nullptr, false);
  int32_t status = 127 << 8;
  if (!sudo_allowed) {
    static constexpr std::string_view kRefused =
        "sudo: not allowed in this sandbox (it was created with sudo: false)\n";
    WriteAll(err.get(), kRefused.data(), kRefused.size());
    status = 1 << 8;
  } else if (req.is_object() && req["argv"].is_array() && !req["argv"].empty()) {
    SpawnSpec spec;
    for (const auto& a : req["argv"]) spec.argv.push_back(a.get<std::string>());
    for (const auto& e : req["env"]) spec.env.push_back(e.get<std::string>());
    spec.cwd = req.value("cwd", "/");
    spec.stdin_fd = in.get();
    spec.stdout_fd = out.get();
    spec.stderr_fd = err.get();
    SpawnResult r = Spawn(spec);
    if (r.pid > 0 && r.error == 0) {
      auto client = std::make_unique<Client>();
      client->pid = r.pid;
      int fd = conn.get();
      client->conn = std::move(conn);
      registry_.Add(r.pid, [this, fd](int st) {
        auto it = clients_.find(fd);
        if (it == clients_.end()) return;
        int32_t s = st;
        WriteAll(fd, &s, sizeof s);
        registry_.Remove(it->second->pid);
        loop_.Remove(fd);
        clients_.erase(it);
      });
      // A client that goes away (killed with its command) takes the root
      // command down with it.
      loop_.Add(fd, EPOLLRDHUP, [this, fd](uint32_t) { OnClientHangup(fd); });
      clients_[fd] = std::move(client);
      return;
    }
    std::string text = "sudo: " + spec.argv[0] + ": " +
                       (r.error == ENOENT ? "command not found" : std::strerror(r.error)) + "\n";
    WriteAll(err.get(), text.data(), text.size());
  }
  WriteAll(conn.get(), &status, sizeof status);
}

void SetSudoAllowed(bool allowed) { sudo_allowed = allowed; }
bool SudoAllowed() { return sudo_allowed; }

void SudoServer::OnClientHangup(int fd) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  pid_t pid = it->second->pid;
  if (::kill(-pid, SIGKILL) < 0) ::kill(pid, SIGKILL);
  loop_.Remove(fd);
  registry_.Remove(pid);
  clients_.erase(it);
}

int SudoMain(int argc, char** argv) {
  int i = 1;
  bool login = false;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-') break;
    if (a == "-u" && i + 1 < argc) {
      std::string who = argv[++i];
      if (who != "root" && who != "0" && who != "#0") {
        std::fprintf(stderr, "sudo: only root is supported in a kiln sandbox\n");
        return 1;
      }
    } else if (a == "-i" || a == "-s") {
      login = true;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: sudo [-n] [-E] [-H] [-u root] [-i|-s] [--] command [args...]\n");
      return 0;
    }
    // -n, -E, -H, -S, -k and the like need nothing here.
  }
  std::vector<std::string> cmd(argv + i, argv + argc);
  if (cmd.empty()) {
    if (!login) {
      std::fprintf(stderr, "usage: sudo [-n] [-E] [-H] [-u root] [-i|-s] [--] command [args...]\n");
      return 1;
    }
    std::string shell = Shell();
    if (shell.empty()) {
      std::fprintf(stderr, "sudo: this image has no shell\n");
      return 1;
    }
    cmd = {shell, "-l"};
  }
  json env = json::array();
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    for (const char* drop : {"HOME=", "USER=", "LOGNAME="}) {
      if (kv.rfind(drop, 0) == 0) kv.clear();
    }
    if (!kv.empty()) env.push_back(kv);
  }
  const char* user = getenv("USER");
  for (const std::string& kv :
       {std::string("HOME=/root"), std::string("USER=root"), std::string("LOGNAME=root"),
        "SUDO_USER=" + std::string(user ? user : "user"), "SUDO_UID=" + std::to_string(getuid()),
        "SUDO_GID=" + std::to_string(getgid())})
    env.push_back(kv);
  char cwd[4096];
  json req = {{"argv", cmd}, {"env", env}, {"cwd", getcwd(cwd, sizeof cwd) ? cwd : "/"}};
  std::string body = req.dump();
  uint32_t len = static_cast<uint32_t>(body.size());

  UniqueFd sock(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr = SocketAddress();
  if (!sock || connect(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) {
    std::fprintf(stderr, "sudo: cannot reach the kiln agent: %s\n", std::strerror(errno));
    return 1;
  }
  int fds[3] = {0, 1, 2};
  StdioMessage m;
  m.len = len;
  msghdr& msg = m.msg;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  if (sendmsg(sock.get(), &msg, 0) != sizeof len ||
      !WriteAll(sock.get(), body.data(), body.size())) {
    std::fprintf(stderr, "sudo: cannot send the request: %s\n", std::strerror(errno));
    return 1;
  }
  int32_t status = 0;
  size_t got = 0;
  while (got < sizeof status) {
    ssize_t n = ::read(sock.get(), reinterpret_cast<char*>(&status) + got, sizeof status - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::fprintf(stderr, "sudo: the kiln agent did not run the command\n");
      return 1;
    }
    got += static_cast<size_t>(n);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    signal(WTERMSIG(status), SIG_DFL);
    raise(WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  return 1;
}

}  // namespace kiln::agent
