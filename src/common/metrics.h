// A process-wide Prometheus metrics registry, rendered in the text exposition
// format 0.0.4. All functions are thread-safe. Updating an existing series takes
// a shared lock and one atomic operation, so hot paths do not serialize.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::metrics {

// Label pairs, rendered in the order given. The same names in a different order
// make a different series, so callers should keep the order fixed.
using Labels = std::vector<std::pair<std::string, std::string>>;

// Declares a metric family once (idempotent; the first call wins); type is
// "counter", "gauge" or "histogram". Undeclared families still render: Inc makes
// a counter, Set a gauge, Observe a histogram, each without HELP.
void Describe(const std::string& name, const std::string& type, const std::string& help);

void Inc(const std::string& name, const Labels& labels = {}, double by = 1);  // counter
void Set(const std::string& name, const Labels& labels, double value);        // gauge
// Histogram with fixed buckets from 1ms to 30 min (kBucketBounds in metrics.cc).
void Observe(const std::string& name, const Labels& labels, double seconds);
// kiln_operation_seconds{op=NAME}: the latency of one kind of API operation
// (create, restore, exec, snapshot, fork).
void ObserveOperation(const std::string& name, double seconds);

// Gauges computed at scrape time: the callback calls `emit(labels, value)` for
// each series of `name`. It runs without the registry lock held, so it may
// itself update metrics; it must not call Render.
using Emit = std::function<void(const Labels&, double)>;
void AddCollector(const std::string& name, std::function<void(const Emit&)> collect);

// Families sorted by name, series in first-seen order, then collector output.
std::string Render();

// Clears every family and collector. Unit tests only: must not race with updates.
void ResetForTest();

}  // namespace kiln::metrics
