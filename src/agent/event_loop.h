// Single-threaded epoll loop of the agent. Everything in the agent runs on
// it, so no state needs a lock; a handler must never block.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>

namespace kiln::agent {

int64_t MonotonicMs();

class EventLoop {
 public:
  using FdCallback = std::function<void(uint32_t events)>;
  using TimerId = uint64_t;

  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Watches `fd` (which the caller keeps open) for `events` (EPOLLIN, ...).
  void Add(int fd, uint32_t events, FdCallback cb);
  void Modify(int fd, uint32_t events);
  // Safe to call from inside any callback, including the fd's own.
  void Remove(int fd);

  TimerId AddTimer(int64_t delay_ms, std::function<void()> cb);
  void CancelTimer(TimerId id);

  // Runs until Stop() is called.
  void Run();
  void Stop() { running_ = false; }

 private:
  struct Watch {
    uint64_t generation;
    std::shared_ptr<FdCallback> cb;
  };
  void RunDueTimers();

  int epfd_;
  bool running_ = true;
  uint64_t next_generation_ = 1;
  std::unordered_map<int, Watch> watches_;
  TimerId next_timer_ = 1;
  std::multimap<int64_t, TimerId> timer_order_;
  std::unordered_map<TimerId, std::pair<int64_t, std::function<void()>>> timers_;
};

}  // namespace kiln::agent
