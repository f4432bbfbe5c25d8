#include "images/manager/image_waiters.h"

#include <thread>

#include "common/time.h"

namespace kiln::images {

std::optional<Result<std::string>> ImageStanding(
    const ImageRecord& rec, int64_t retry_ms,
    const std::function<Status(const std::string& why)>& failed) {
  if (rec.state == ImageState::kReady) return Result<std::string>(rec.id);
  if (rec.state == ImageState::kQueued || rec.state == ImageState::kBuilding)
    return Result<std::string>(std::string());
  if (rec.state == ImageState::kFailed && NowMs() - rec.ended_ms < retry_ms)
    return Result<std::string>(failed(rec.error.is_object()
                                          ? rec.error.value("message", std::string("failed"))
                                          : std::string("failed")));
  return std::nullopt;
}

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
