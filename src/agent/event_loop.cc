#include "agent/event_loop.h"

#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace kiln::agent {

int64_t MonotonicMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

EventLoop::EventLoop() : epfd_(epoll_create1(EPOLL_CLOEXEC)) {}
EventLoop::~EventLoop() { ::close(epfd_); }

void EventLoop::Add(int fd, uint32_t events, FdCallback cb) {
  uint64_t gen = next_generation_++;
  watches_[fd] = Watch{gen, std::make_shared<FdCallback>(std::move(cb))};
  epoll_event ev{};
  ev.events = events;
  // The generation guards against a callback of an fd number that was
  // closed and reused within one batch of events.
  ev.data.u64 = gen << 32 | static_cast<uint32_t>(fd);
  epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev);
}

void EventLoop::Modify(int fd, uint32_t events) {
  auto it = watches_.find(fd);
  if (it == watches_.end()) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = it->second.generation << 32 | static_cast<uint32_t>(fd);
  epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev);
}

void EventLoop::Remove(int fd) {
  if (watches_.erase(fd)) epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
}

EventLoop::TimerId EventLoop::AddTimer(int64_t delay_ms, std::function<void()> cb) {
  TimerId id = next_timer_++;
  int64_t due = MonotonicMs() + delay_ms;
  timers_[id] = {due, std::move(cb)};
  timer_order_.emplace(due, id);
  return id;
}

void EventLoop::CancelTimer(TimerId id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) return;
  auto [lo, hi] = timer_order_.equal_range(it->second.first);
  for (auto o = lo; o != hi; ++o) {
    if (o->second == id) {
      timer_order_.erase(o);
      break;
    }
  }
  timers_.erase(it);
}

void EventLoop::RunDueTimers() {
  int64_t now = MonotonicMs();
  while (!timer_order_.empty() && timer_order_.begin()->first <= now) {
    TimerId id = timer_order_.begin()->second;
    timer_order_.erase(timer_order_.begin());
    auto it = timers_.find(id);
    if (it == timers_.end()) continue;
    auto cb = std::move(it->second.second);
    timers_.erase(it);
    cb();
  }
}

void EventLoop::Run() {
  std::vector<epoll_event> events(64);
  while (running_) {
    int timeout = -1;
    if (!timer_order_.empty()) {
      int64_t wait = timer_order_.begin()->first - MonotonicMs();
      timeout = wait < 0 ? 0 : static_cast<int>(wait);
    }
    int n = epoll_wait(epfd_, events.data(), static_cast<int>(events.size()), timeout);
    if (n < 0 && errno != EINTR) return;
    for (int i = 0; i < n; ++i) {
      int fd = static_cast<int>(events[i].data.u64 & 0xffffffffu);
      uint64_t gen = events[i].data.u64 >> 32;
      auto it = watches_.find(fd);
      if (it == watches_.end() || it->second.generation != gen) continue;
      auto cb = it->second.cb;  // keeps the callback alive if it removes itself
      (*cb)(events[i].events);
    }
    RunDueTimers();
  }
}

}  // namespace kiln::agent
