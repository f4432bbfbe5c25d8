#include "agent/sudo.h"

#include "agent/run_as.h"

#include <limits.h>
#include <poll.h>
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

// The agent writes to descriptors a sandbox user handed it (a sudo
// caller's stderr, its socket): a short message goes only if it fits now
// (POLLOUT on a pipe means PIPE_BUF bytes of room), so a full pipe never
// stops the agent.
void WriteIfRoom(int fd, std::string_view text) {
  pollfd p{fd, POLLOUT, 0};
  if (text.size() <= PIPE_BUF && ::poll(&p, 1, 0) == 1 && (p.revents & POLLOUT)) [[maybe_unused]]
    ssize_t w = ::write(fd, text.data(), text.size());
}

void SendStatus(int sock, int32_t status) {
  [[maybe_unused]] ssize_t w = ::send(sock, &status, sizeof status, MSG_DONTWAIT | MSG_NOSIGNAL);
}

// A request's argv/env: strings only.
bool Strings(const json& j, std::vector<std::string>* out) {
  if (!j.is_array()) return false;
  for (const auto& v : j) {
    if (!v.is_string()) return false;
    out->push_back(v.get<std::string>());
  }
  return true;
}

}  // namespace

struct SudoServer::Client {
  UniqueFd conn;
  pid_t pid = -1;
};

// A connection whose request has not all come yet.
struct SudoServer::Pending {
  UniqueFd conn;
  EventLoop::TimerId timer = 0;
  UniqueFd in, out, err;
  bool have_header = false;
  uint32_t len = 0;
  std::string body;
};

SudoServer::SudoServer(EventLoop& loop, CommandRegistry& registry)
    : loop_(loop), registry_(registry) {}

SudoServer::~SudoServer() {
  if (listener_) loop_.Remove(listener_.get());
  for (auto& [fd, p] : pending_) {
    loop_.Remove(fd);
    loop_.CancelTimer(p->timer);
  }
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
    UniqueFd conn(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn) return;
    // Requests are read as they come, on the loop: a caller that connects
    // and says nothing (or too little) holds nothing but its own socket,
    // for at most kRequestMs.
    if (pending_.size() >= kMaxPending) continue;  // closed: too many at once
    int fd = conn.get();
    auto p = std::make_unique<Pending>();
    p->conn = std::move(conn);
    p->timer = loop_.AddTimer(kRequestMs, [this, fd] { DropPending(fd); });
    pending_[fd] = std::move(p);
    loop_.Add(fd, EPOLLIN, [this, fd](uint32_t) { OnReadable(fd); });
  }
}

void SudoServer::DropPending(int fd) {
  auto it = pending_.find(fd);
  if (it == pending_.end()) return;
  loop_.Remove(fd);
  loop_.CancelTimer(it->second->timer);
  pending_.erase(it);
}

void SudoServer::OnReadable(int fd) {
  auto it = pending_.find(fd);
  if (it == pending_.end()) return;
  Pending& p = *it->second;
  if (!p.have_header) {
    // The first message: u32 length with the caller's stdin, stdout and
    // stderr beside it (SCM_RIGHTS), sent in one sendmsg.
    int fds[3] = {-1, -1, -1};
    StdioMessage m;
    ssize_t n = recvmsg(fd, &m.msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m.msg); c; c = CMSG_NXTHDR(&m.msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
          c->cmsg_len >= CMSG_LEN(sizeof fds))
        std::memcpy(fds, CMSG_DATA(c), sizeof fds);
    }
    p.in.reset(fds[0]);
    p.out.reset(fds[1]);
    p.err.reset(fds[2]);
    if (n != sizeof m.len || m.len > kMaxRequest || !p.in || !p.out || !p.err) {
      std::fprintf(stderr, "kiln-agent: malformed sudo request\n");
      return DropPending(fd);
    }
    p.have_header = true;
    p.len = m.len;
    p.body.reserve(p.len);
  }
  char buf[16384];
  while (p.body.size() < p.len) {
    ssize_t n = ::read(fd, buf, std::min(sizeof buf, p.len - p.body.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;  // more to come
    if (n <= 0) return DropPending(fd);
    p.body.append(buf, static_cast<size_t>(n));
  }
  std::unique_ptr<Pending> done = std::move(it->second);
  pending_.erase(it);
  loop_.Remove(fd);
  loop_.CancelTimer(done->timer);
  Run(std::move(*done));
}

void SudoServer::Run(Pending req) {
  UniqueFd conn = std::move(req.conn);
  UniqueFd in = std::move(req.in), out = std::move(req.out), err = std::move(req.err);
  json body = json::parse(req.body, nullptr, false);
  int32_t status = 127 << 8;
  SpawnSpec spec;
  bool valid = body.is_object() && Strings(body.value("argv", json()), &spec.argv) &&
               !spec.argv.empty() && Strings(body.value("env", json::array()), &spec.env) &&
               body.value("cwd", json("/")).is_string();
  if (!sudo_allowed) {
    WriteIfRoom(err.get(), "sudo: not allowed in this sandbox (it was created with sudo: false)\n");
    status = 1 << 8;
  } else if (valid) {
    spec.cwd = body.value("cwd", "/");
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
        SendStatus(fd, st);
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
    WriteIfRoom(err.get(), "sudo: " + spec.argv[0].substr(0, 256) + ": " +
                               (r.error == ENOENT ? "command not found" : std::strerror(r.error)) +
                               "\n");
  } else {
    WriteIfRoom(err.get(), "sudo: malformed request\n");
  }
  SendStatus(conn.get(), status);
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
