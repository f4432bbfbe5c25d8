#include "engine/stderr_drain.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "common/log.h"

namespace kiln::engine {

StderrDrain::StderrDrain() {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) == 0) {
    wake_r_.reset(wake[0]);
    wake_w_.reset(wake[1]);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_r_.get();
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_r_.get(), &ev);
  }
  thread_ = std::thread([this] { Loop(); });
}

StderrDrain::~StderrDrain() {
  char b = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_w_.get(), &b, 1);
  if (thread_.joinable()) thread_.join();
}

void StderrDrain::Add(const std::string& id, UniqueFd fifo, const std::string& log) {
  Remove(id);
  Source s;
  s.id = id;
  s.log.reset(::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
  struct stat st;
  if (s.log && ::fstat(s.log.get(), &st) == 0) s.written = static_cast<uint64_t>(st.st_size);
  int fd = fifo.get();
  s.fifo = std::move(fifo);
  std::lock_guard lock(mu_);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) < 0) {
    LogWarn("cannot watch a sandbox's stderr", {{"sandboxId", id}, {"error", strerror(errno)}});
    return;
  }
  sources_.emplace(fd, std::move(s));
}

void StderrDrain::Flush(const std::string& id) {
  std::lock_guard lock(mu_);
  for (auto& [fd, s] : sources_)
    if (s.id == id) (void)Pump(s, kMaxBytes);
}

void StderrDrain::Remove(const std::string& id) {
  std::lock_guard lock(mu_);
  for (auto it = sources_.begin(); it != sources_.end(); ++it) {
    if (it->second.id != id) continue;
    if (!it->second.capped) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->first, nullptr);
    sources_.erase(it);
    return;
  }
}

bool StderrDrain::Pump(Source& s, uint64_t budget) {
  char buf[65536];
  for (uint64_t taken = 0; taken < budget;) {
    ssize_t n = ::read(s.fifo.get(), buf, sizeof buf);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    taken += static_cast<uint64_t>(n);
    uint64_t room = s.written < kMaxBytes ? kMaxBytes - s.written : 0;
    uint64_t keep = std::min<uint64_t>(room, static_cast<uint64_t>(n));
    if (keep > 0 && s.log) {
      ssize_t w = ::write(s.log.get(), buf, keep);
      if (w > 0) s.written += static_cast<uint64_t>(w);
    }
    if (keep == static_cast<uint64_t>(n)) continue;
    if (s.dropped == 0) {
      std::string note = "\n[kiln: stderr passed " + std::to_string(kMaxBytes >> 10) +
                         " KiB; the rest is dropped]\n";
      if (s.log) [[maybe_unused]]
        ssize_t w = ::write(s.log.get(), note.data(), note.size());
      LogWarn("a sandbox's stderr passed its cap: the rest is dropped",
              {{"sandboxId", s.id}, {"capBytes", kMaxBytes}});
    }
    s.dropped += static_cast<uint64_t>(n) - keep;
    if (!s.capped) {  // from now on swept once a second, not watched
      s.capped = true;
      ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.fifo.get(), nullptr);
      return true;
    }
  }
  return true;
}

void StderrDrain::Loop() {
  epoll_event events[64];
  auto last_sweep = std::chrono::steady_clock::now();
  for (;;) {
    int n = ::epoll_wait(epoll_.get(), events, 64, 1000);
    if (n < 0 && errno != EINTR) return;
    std::lock_guard lock(mu_);
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == wake_r_.get()) return;
      auto it = sources_.find(fd);
      if (it == sources_.end()) continue;
      if (!Pump(it->second, kSweepBytes)) {  // no writer left: the sandbox is gone
        if (!it->second.capped) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
        sources_.erase(it);
      }
    }
    auto now = std::chrono::steady_clock::now();
    if (now - last_sweep < std::chrono::seconds(1)) continue;
    last_sweep = now;
    for (auto it = sources_.begin(); it != sources_.end();) {
      if (it->second.capped && !Pump(it->second, kSweepBytes)) {
        it = sources_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

}  // namespace kiln::engine
