#include "daemon/process_metrics.h"

#include "common/heap.h"
#include "common/metrics.h"
#include "store/db.h"

namespace kiln::daemon {

void AddProcessCollectors() {
  metrics::Describe("kiln_daemon_heap_bytes", "gauge",
                    "kilnd's malloc heap: in use, and freed but still held.");
  metrics::AddCollector("kiln_daemon_heap_bytes", [](const metrics::Emit& emit) {
    heap::Stats h = heap::Read();
    emit({{"kind", "in_use"}}, static_cast<double>(h.in_use_bytes));
    emit({{"kind", "free"}}, static_cast<double>(h.free_bytes));
  });
  metrics::Describe("kiln_daemon_sqlite_bytes", "gauge",
                    "Memory SQLite holds in kilnd (page cache, statements).");
  metrics::AddCollector("kiln_daemon_sqlite_bytes", [](const metrics::Emit& emit) {
    emit({}, static_cast<double>(store::Db::MemoryUsed()));
  });
}

}  // namespace kiln::daemon
