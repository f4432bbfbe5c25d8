#include "engine/memory_guard.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <stop_token>
#include <vector>

#include "common/time.h"

namespace kiln::engine {

MemoryGuard::MemoryGuard()
    : epfd_(epoll_create1(EPOLL_CLOEXEC)), wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_.get();
  epoll_ctl(epfd_, EPOLL_CTL_ADD, wake_.get(), &ev);
  thread_ = std::jthread([this](std::stop_token stop) { Loop(stop); });
  armer_ = std::jthread([this](std::stop_token stop) { ArmLoop(stop); });
}

MemoryGuard::~MemoryGuard() {
  armer_.request_stop();
  armer_.join();
  // Loop's stop callback wakes its epoll_wait. Joined here, not by the
  // member's destructor, so that it is gone before epfd_ closes.
  thread_.request_stop();
  thread_.join();
  ::close(epfd_);
}

bool MemoryGuard::Watch(const std::string& id, const std::string& cgroup_dir,
                        int64_t threshold_bytes, std::function<void()> on_exceeded) {
  Entry e;
  e.usage.reset(::open((cgroup_dir + "/memory.usage_in_bytes").c_str(), O_RDONLY | O_CLOEXEC));
  e.stat.reset(::open((cgroup_dir + "/memory.stat").c_str(), O_RDONLY | O_CLOEXEC));
  e.control.reset(::open((cgroup_dir + "/cgroup.event_control").c_str(), O_WRONLY | O_CLOEXEC));
  e.event.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!e.usage || !e.stat || !e.control || !e.event) return false;
  e.threshold = threshold_bytes;
  e.cb = std::move(on_exceeded);
  {
    std::lock_guard lock(mu_);
    int fd = e.event.get();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev);
    by_fd_[fd] = id;
    entries_[id] = std::move(e);
    to_arm_.push_back(id);
  }
  arm_cv_.notify_one();
  return true;
}

void MemoryGuard::ArmLoop(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (arm_cv_.wait(lock, stop, [&] { return !to_arm_.empty(); })) {
    std::string id = std::move(to_arm_.front());
    to_arm_.pop_front();
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;  // unwatched before it was armed
    // Written without the lock, through duplicates: an Unwatch meanwhile
    // closes the entry's fds, and their numbers could be reused.
    UniqueFd control = std::move(it->second.control);
    UniqueFd event(::fcntl(it->second.event.get(), F_DUPFD_CLOEXEC, 0));
    UniqueFd usage_fd(::fcntl(it->second.usage.get(), F_DUPFD_CLOEXEC, 0));
    std::string line = std::to_string(event.get()) + " " + std::to_string(usage_fd.get()) + " " +
                       std::to_string(it->second.threshold);
    lock.unlock();
    bool armed =
        event && usage_fd &&
        ::write(control.get(), line.data(), line.size()) == static_cast<ssize_t>(line.size());
    int64_t usage = ReadUsage(usage_fd.get());
    lock.lock();
    it = entries_.find(id);
    if (it == entries_.end() || !armed) continue;
    // Armed after the usage had already crossed: no event will come for
    // it, so the guard's loop looks at it now.
    if (usage > it->second.threshold && !it->second.polling) {
      it->second.polling = true;
      ++polling_;
      uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
    }
  }
}

void MemoryGuard::Unwatch(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  epoll_ctl(epfd_, EPOLL_CTL_DEL, it->second.event.get(), nullptr);
  by_fd_.erase(it->second.event.get());
  if (it->second.polling) --polling_;
  entries_.erase(it);
}

MemoryGuard::Verdict MemoryGuard::Assess(const Entry& e) {
  if (ReadUsage(e.usage.get()) <= e.threshold) return Verdict::kFine;
  return ReadAnon(e.stat.get()) > e.threshold ? Verdict::kOver : Verdict::kCacheHigh;
}

void MemoryGuard::Loop(std::stop_token stop) {
  // Runs on the thread that requests the stop: the loop may be in an
  // epoll_wait with no timeout.
  std::stop_callback wake(stop, [this] {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
  });
  epoll_event events[16];
  while (!stop.stop_requested()) {
    int timeout_ms;
    {
      std::lock_guard lock(mu_);
      timeout_ms = polling_ > 0 ? kPollMs : -1;
    }
    int n = epoll_wait(epfd_, events, 16, timeout_ms);
    if (stop.stop_requested()) return;
    std::vector<std::function<void()>> act;
    {
      std::lock_guard lock(mu_);
      int64_t now = MonotonicNowMs();
      auto check = [&](Entry& e) {
        Verdict v = Assess(e);
        bool poll = v != Verdict::kFine;
        if (poll != e.polling) polling_ += poll ? 1 : -1;
        e.polling = poll;
        if (v == Verdict::kOver && now - e.acted_ms >= kCooldownMs) {
          e.acted_ms = now;
          act.push_back(e.cb);
        }
      };
      for (int i = 0; i < n; ++i) {
        uint64_t count;
        [[maybe_unused]] ssize_t r = ::read(events[i].data.fd, &count, sizeof count);
        auto it = by_fd_.find(events[i].data.fd);
        if (it != by_fd_.end()) check(entries_[it->second]);
      }
      if (polling_ > 0 && now - last_poll_ms_ >= kPollMs) {
        last_poll_ms_ = now;
        for (auto& [id, e] : entries_)
          if (e.polling) check(e);
      }
    }
    for (auto& cb : act) cb();
  }
}

int64_t MemoryGuard::ReadUsage(int usage_fd) {
  char buf[32];
  ssize_t n = ::pread(usage_fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  return std::strtoll(buf, nullptr, 10);
}

int64_t MemoryGuard::ReadAnon(int stat_fd) {
  char buf[8192];
  ssize_t n = ::pread(stat_fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  return ParseAnonBytes(buf);
}

int64_t ParseAnonBytes(std::string_view memory_stat) {
  int64_t total = 0;
  while (!memory_stat.empty()) {
    size_t eol = memory_stat.find('\n');
    std::string_view line = memory_stat.substr(0, eol);
    for (std::string_view key : {"total_rss ", "total_shmem "}) {
      if (line.substr(0, key.size()) == key)
        total += std::strtoll(std::string(line.substr(key.size())).c_str(), nullptr, 10);
    }
    if (eol == std::string_view::npos) break;
    memory_stat.remove_prefix(eol + 1);
  }
  return total;
}

}  // namespace kiln::engine
