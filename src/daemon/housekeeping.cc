#include "daemon/housekeeping.h"

#include <chrono>
#include <exception>
#include <thread>

#include "common/heap.h"
#include "common/log.h"
#include "common/time.h"

namespace kiln::daemon {

void StartDatabasePruning(store::IdempotencyStore& idempotency, store::UsageStore& usage,
                          store::EgressLogStore& egress_log) {
  std::thread([&idempotency, &usage, &egress_log] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::hours(1));
      try {
        idempotency.DeleteExpired(NowMs());
        usage.DeleteBefore(NowMs() - 400LL * 86400000);
        egress_log.DeleteBefore(NowMs() - 30LL * 86400000);
      } catch (const std::exception& e) {
        LogError("cannot prune the database", {{"error", e.what()}});
      }
    }
  }).detach();
}

void StartHeapTrimming() {
  std::thread([] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::seconds(30));
      heap::ReleaseFree();
    }
  }).detach();
}

}  // namespace kiln::daemon
