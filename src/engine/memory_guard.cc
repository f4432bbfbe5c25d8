#include "engine/memory_guard.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

namespace kiln::engine {

MemoryGuard::MemoryGuard()
    : epfd_(epoll_create1(EPOLL_CLOEXEC)), wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_.get();
  epoll_ctl(epfd_, EPOLL_CTL_ADD, wake_.get(), &ev);
  thread_ = std::thread([this] { Loop(); });
}

MemoryGuard::~MemoryGuard() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
  thread_.join();
  ::close(epfd_);
}

bool MemoryGuard::Watch(const std::string& id, const std::string& cgroup_dir,
                        int64_t threshold_bytes, std::function<void()> on_exceeded) {
  Entry e;
  e.usage.reset(::open((cgroup_dir + "/memory.usage_in_bytes").c_str(), O_RDONLY | O_CLOEXEC));
  UniqueFd control(::open((cgroup_dir + "/cgroup.event_control").c_str(), O_WRONLY | O_CLOEXEC));
  e.event.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!e.usage || !control || !e.event) return false;
  std::string line = std::to_string(e.event.get()) + " " + std::to_string(e.usage.get()) + " " +
                     std::to_string(threshold_bytes);
  if (::write(control.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    return false;
  e.threshold = threshold_bytes;
  e.cb = std::move(on_exceeded);
  std::lock_guard lock(mu_);
  int fd = e.event.get();
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev);
  by_fd_[fd] = id;
  entries_[id] = std::move(e);
  return true;
}

void MemoryGuard::Unwatch(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  epoll_ctl(epfd_, EPOLL_CTL_DEL, it->second.event.get(), nullptr);
  by_fd_.erase(it->second.event.get());
  entries_.erase(it);
}

void MemoryGuard::Loop() {
  epoll_event events[16];
  for (;;) {
    int n = epoll_wait(epfd_, events, 16, -1);
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      uint64_t count;
      [[maybe_unused]] ssize_t r = ::read(fd, &count, sizeof count);
      std::function<void()> cb;
      {
        std::lock_guard lock(mu_);
        if (stop_) return;
        auto it = by_fd_.find(fd);
        if (it != by_fd_.end()) {
          const Entry& e = entries_[it->second];
          if (ReadUsage(e.usage.get()) > e.threshold) cb = e.cb;
        }
      }
      if (cb) cb();
    }
    std::lock_guard lock(mu_);
    if (stop_) return;
  }
}

int64_t MemoryGuard::ReadUsage(int usage_fd) {
  char buf[32];
  ssize_t n = ::pread(usage_fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  return std::strtoll(buf, nullptr, 10);
}

}  // namespace kiln::engine
