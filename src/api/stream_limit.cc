#include "api/stream_limit.h"

namespace kiln::api {

std::shared_ptr<void> StreamLimiter::TryOpen(const std::string& sandbox_id) {
  {
    std::lock_guard lock(mu_);
    int& n = open_[sandbox_id];
    if (max_ > 0 && n >= max_) {
      if (n == 0) open_.erase(sandbox_id);
      return nullptr;
    }
    ++n;
  }
  // The handle owns nothing but the release: the limiter outlives every
  // request (kilnd drains its connections before destroying it).
  return std::shared_ptr<void>(static_cast<void*>(this),
                               [this, sandbox_id](void*) { Close(sandbox_id); });
}

int StreamLimiter::open(const std::string& sandbox_id) const {
  std::lock_guard lock(mu_);
  auto it = open_.find(sandbox_id);
  return it == open_.end() ? 0 : it->second;
}

void StreamLimiter::Close(const std::string& sandbox_id) {
  std::lock_guard lock(mu_);
  auto it = open_.find(sandbox_id);
  if (it == open_.end()) return;
  if (--it->second <= 0) open_.erase(it);
}

}  // namespace kiln::api
