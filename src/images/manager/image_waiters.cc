#include "images/manager/image_waiters.h"

#include <thread>

namespace kiln::images {

Result<std::string> ImageWaiters::Wait(const std::string& waiter,
                                       const std::function<Result<std::string>()>& look,
                                       const Status& busy,
                                       std::chrono::steady_clock::time_point deadline,
                                       const std::function<bool()>& cancelled) {
  Result<std::string> id = look();
  if (!id.ok() || !id->empty()) return id;
  {
    std::lock_guard lock(mu_);
    if (waiting_[waiter] >= kWaitingPerKey) return busy;
    ++waiting_[waiter];
  }
  struct Leave {
    ImageWaiters* self;
    const std::string& waiter;
    ~Leave() {
      std::lock_guard lock(self->mu_);
      if (--self->waiting_[waiter] <= 0) self->waiting_.erase(waiter);
    }
  } leave{this, waiter};
  for (;;) {
    if (std::chrono::steady_clock::now() >= deadline || (cancelled && cancelled())) return busy;
    std::this_thread::sleep_for(kPoll);
    id = look();
    if (!id.ok() || !id->empty()) return id;
  }
}

}  // namespace kiln::images
