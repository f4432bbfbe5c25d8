// kilnd's own gauges as a process, beside the control plane's: its malloc
// heap and SQLite's memory (kiln_daemon_*). Registered by the daemon, which
// owns the process and its database, so that no front reaches the store
// for them; GET /metrics renders them with the rest.
#pragma once

namespace kiln::daemon {

// Describes kiln_daemon_heap_bytes and kiln_daemon_sqlite_bytes and adds
// their collectors (common/metrics.h). Once, before serving.
void AddProcessCollectors();

}  // namespace kiln::daemon
