// GET /metrics: Prometheus text for operators (admin keys).
#include "api/errors.h"
#include "api/kiln/errors.h"
#include "api/kiln/routes.h"
#include "common/metrics.h"

namespace kiln::api::v1 {

namespace {

// Gauges read at scrape time from the control plane.
void AddCollectors(ApiContext& ctx) {
  metrics::Describe("kiln_build_info", "gauge",
                    "1, labelled with kiln's version and the engine's (runsc) version.");
  metrics::AddCollector("kiln_build_info", [&ctx](const metrics::Emit& emit) {
    control::EngineInfo e = ctx.sandboxes.EngineInfo();
    emit({{"version", KILN_VERSION},
          {"engine", e.name},
          {"engine_version", e.version},
          {"engine_pinned", e.pinned() ? "true" : "false"}},
         1);
  });
  metrics::Describe("kiln_sandboxes", "gauge", "Sandboxes by state.");
  metrics::AddCollector("kiln_sandboxes", [&ctx](const metrics::Emit& emit) {
    for (const auto& [state, n] : ctx.sandboxes.CountByState())
      emit({{"state", std::string(control::StateName(state))}}, n);
  });
  metrics::Describe("kiln_capacity_queue_length", "gauge", "Creates waiting for capacity.");
  metrics::AddCollector("kiln_capacity_queue_length", [&ctx](const metrics::Emit& emit) {
    emit({}, ctx.sandboxes.CapacityStats().waiting);
  });
  metrics::Describe("kiln_capacity_reserved_memory_mib", "gauge",
                    "Memory reserved by running sandboxes and waiting pool copies.");
  metrics::AddCollector("kiln_capacity_reserved_memory_mib", [&ctx](const metrics::Emit& emit) {
    emit({}, static_cast<double>(ctx.sandboxes.CapacityStats().reserved_memory_mib));
  });
  metrics::Describe("kiln_capacity_reserved_vcpus", "gauge",
                    "vCPUs reserved by running sandboxes.");
  metrics::AddCollector("kiln_capacity_reserved_vcpus", [&ctx](const metrics::Emit& emit) {
    emit({}, ctx.sandboxes.CapacityStats().reserved_vcpus);
  });
  metrics::Describe("kiln_capacity_reserved_disk_mib", "gauge",
                    "Disk (diskMiB) reserved by running sandboxes and waiting pool copies.");
  metrics::AddCollector("kiln_capacity_reserved_disk_mib", [&ctx](const metrics::Emit& emit) {
    emit({}, static_cast<double>(ctx.sandboxes.CapacityStats().reserved_disk_mib));
  });
  metrics::Describe("kiln_capacity_budget_disk_mib", "gauge",
                    "Disk that reservations may total (state disk x --disk-overcommit).");
  metrics::AddCollector("kiln_capacity_budget_disk_mib", [&ctx](const metrics::Emit& emit) {
    int64_t b = ctx.sandboxes.capacity_limits().disk_budget_mib();
    emit({}, b == INT64_MAX ? 0.0 : static_cast<double>(b));
  });
  metrics::Describe("kiln_capacity_pooled", "gauge", "Warm-pool copies holding capacity.");
  metrics::AddCollector("kiln_capacity_pooled", [&ctx](const metrics::Emit& emit) {
    emit({}, ctx.sandboxes.CapacityStats().pooled);
  });
  metrics::Describe("kiln_capacity_budget_memory_mib", "gauge",
                    "Memory that reservations may total (host memory x overcommit).");
  metrics::AddCollector("kiln_capacity_budget_memory_mib", [&ctx](const metrics::Emit& emit) {
    emit({}, static_cast<double>(ctx.sandboxes.capacity_limits().memory_budget_mib()));
  });
  metrics::Describe("kiln_pool_ready", "gauge", "Ready, never-used copies in a snapshot's pool.");
  metrics::AddCollector("kiln_pool_ready", [&ctx](const metrics::Emit& emit) {
    for (const auto& [id, st] : ctx.sandboxes.snapshots().Pools())
      emit({{"snapshot", id}}, st.ready);
  });
  metrics::Describe("kiln_pool_target", "gauge", "Target size of a snapshot's pool.");
  metrics::AddCollector("kiln_pool_target", [&ctx](const metrics::Emit& emit) {
    for (const auto& [id, st] : ctx.sandboxes.snapshots().Pools())
      emit({{"snapshot", id}}, st.size);
  });
  metrics::Describe("kiln_pool_creates_total", "counter",
                    "Creates from a snapshot (an image's warm copy included) at its shape, by "
                    "whether a pooled copy served them (from=pool) or a restore (from=restore).");
  metrics::Describe("kiln_pool_memory_bytes", "gauge",
                    "Host memory held by pooled copies (their shapes count against capacity).");
  metrics::AddCollector("kiln_pool_memory_bytes", [&ctx](const metrics::Emit& emit) {
    double total = 0;
    for (const auto& [id, st] : ctx.sandboxes.snapshots().Pools())
      total += static_cast<double>(st.memory_bytes);
    emit({}, total);
  });
  metrics::Describe("kiln_pool_memory_budget_bytes", "gauge",
                    "Memory that demand-sized warm pools may hold together (0: off).");
  metrics::AddCollector("kiln_pool_memory_budget_bytes", [&ctx](const metrics::Emit& emit) {
    const control::WarmPoolOptions& o = ctx.sandboxes.snapshots().pool_options();
    emit({}, o.adaptive ? static_cast<double>(o.sizer.budget_bytes) : 0.0);
  });
  metrics::Describe("kiln_pool_wanted", "gauge",
                    "Copies a snapshot's pool is asked for (its demand, or its pin).");
  metrics::AddCollector("kiln_pool_wanted", [&ctx](const metrics::Emit& emit) {
    for (const auto& [id, st] : ctx.sandboxes.snapshots().Pools())
      emit({{"snapshot", id}}, st.wanted);
  });
  metrics::Describe("kiln_pool_unfilled", "gauge",
                    "1 for a pool holding fewer copies than wanted, labelled with why.");
  metrics::AddCollector("kiln_pool_unfilled", [&ctx](const metrics::Emit& emit) {
    for (const auto& [id, st] : ctx.sandboxes.snapshots().Pools())
      if (!st.unfilled_reason.empty()) emit({{"snapshot", id}, {"reason", st.unfilled_reason}}, 1);
  });
  metrics::Describe("kiln_key_memory_mib", "gauge",
                    "Memory (memoryMiB) of each API key's running sandboxes.");
  metrics::AddCollector("kiln_key_memory_mib", [&ctx](const metrics::Emit& emit) {
    std::map<std::string, int64_t> by_key;
    for (const auto& s : ctx.sandboxes.List(control::ListFilter{}))
      if (s->state() == control::SandboxState::kRunning)
        by_key[s->spec().owner] += s->spec().shape.memory_mib;
    for (const auto& [key, mib] : by_key) emit({{"key", key}}, static_cast<double>(mib));
  });
  // kilnd's own gauges as a process (kiln_daemon_*) are the daemon's:
  // daemon/process_metrics.h.
  metrics::Describe("kiln_http_request_seconds", "histogram", "HTTP request latency by route.");
  metrics::Describe("kiln_http_errors_total", "counter", "Error answers by code.");
  metrics::Describe("kiln_operation_seconds", "histogram",
                    "Latency of create, restore, exec, snapshot and fork.");
  metrics::Describe("kiln_capacity_wait_seconds", "histogram",
                    "Time creates waited in the capacity queue.");
  metrics::Describe("kiln_metered_cpu_seconds_total", "counter",
                    "CPU time measured from sandbox cgroups.");
  metrics::Describe("kiln_key_cpu_seconds_total", "counter",
                    "CPU time measured from sandbox cgroups, by API key.");
  metrics::Describe("kiln_image_build_seconds", "histogram",
                    "Image build durations (steps and warm-up), by result: ready or failed.");
}

}  // namespace

void AddMetricsRoutes(Router& r, ApiContext& ctx) {
  AddCollectors(ctx);
  r.Add("GET", "/metrics", [](Exchange& ex) {
    RequireAdmin(ex, "/metrics needs an admin key");
    ex.SendBytes(200, metrics::Render(), "text/plain; version=0.0.4");
  });
}

}  // namespace kiln::api::v1
