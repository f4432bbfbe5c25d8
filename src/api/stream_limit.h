// Counts the long-lived streams open on each sandbox -- streaming exec,
// followed process output, terminal WebSockets, file and archive downloads
// -- and refuses past a cap. Each stream holds a kilnd thread, a socket and
// an agent stream for as long as the client keeps it, so one sandbox's
// client could otherwise hold thousands and starve its neighbours.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace kiln::api {

class StreamLimiter {
 public:
  // `max_per_sandbox` <= 0: no cap.
  explicit StreamLimiter(int max_per_sandbox) : max_(max_per_sandbox) {}

  int max_per_sandbox() const { return max_; }

  // A slot on `sandbox_id`, freed when the last copy of the handle goes;
  // null when the sandbox's streams are at the cap.
  std::shared_ptr<void> TryOpen(const std::string& sandbox_id);

  // Streams open on `sandbox_id` now.
  int open(const std::string& sandbox_id) const;

 private:
  void Close(const std::string& sandbox_id);

  const int max_;
  mutable std::mutex mu_;
  std::map<std::string, int> open_;  // only sandboxes with a stream open
};

}  // namespace kiln::api
