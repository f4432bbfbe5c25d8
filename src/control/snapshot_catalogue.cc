#include "control/snapshot_catalogue.h"

#include <algorithm>

#include "common/log.h"
#include "common/time.h"

namespace kiln::control {

SnapshotCatalogue::SnapshotCatalogue(engine::Engine& engine, std::string base_rootfs,
                                     store::SnapshotStore& store, Capacity& capacity,
                                     WarmPoolOptions pool_options, int default_pool_size)
    : store_(store),
      base_rootfs_(std::move(base_rootfs)),
      pool_options_(std::move(pool_options)),
      default_pool_size_(default_pool_size),
      pool_(engine, base_rootfs_, store_, pool_options_, &capacity) {}

bool SnapshotCatalogue::Visible(const store::SnapshotRecord& record,
                                const std::optional<std::string>& scope, SnapshotUse use) {
  if (record.hidden()) return false;
  if (use != SnapshotUse::kRead && record.temporary) return false;
  if (use != SnapshotUse::kOrigin && scope && record.owner != *scope) return false;
  return true;
}

std::optional<store::SnapshotRecord> SnapshotCatalogue::FindVisible(
    const std::string& id, const std::optional<std::string>& scope, SnapshotUse use) const {
  auto record = store_.Get(id);
  if (!record || !Visible(*record, scope, use)) return std::nullopt;
  return record;
}

std::vector<store::SnapshotRecord> SnapshotCatalogue::ListVisible(
    const std::optional<std::string>& scope, SnapshotUse use) const {
  std::vector<store::SnapshotRecord> all = store_.List();
  std::erase_if(all, [&](const store::SnapshotRecord& r) { return !Visible(r, scope, use); });
  return all;
}

std::optional<store::SnapshotRecord> SnapshotCatalogue::Find(const std::string& id) const {
  return store_.Get(id);
}

std::vector<store::SnapshotRecord> SnapshotCatalogue::List() const {
  std::vector<store::SnapshotRecord> all = store_.List();
  std::erase_if(all, [](const store::SnapshotRecord& r) { return r.hidden(); });
  return all;
}

bool SnapshotCatalogue::Delete(const std::string& id) {
  pool_.Drop(id);
  return store_.Delete(id);
}

std::vector<std::string> SnapshotCatalogue::DeleteExpired(int64_t now_ms) {
  std::vector<std::string> expired = store_.DeleteExpired(now_ms);
  for (const auto& id : expired) {
    pool_.Drop(id);
    LogInfo("snapshot expired", {{"event", "snapshot.expired"}, {"snapshotId", id}});
  }
  return expired;
}

void SnapshotCatalogue::Captured(const store::SnapshotRecord& record, bool pooled) {
  MarkMetered(record.id, record.created_ms);
  if (default_pool_size_ > 0 && pooled) pool_.Resize(record.id, default_pool_size_);
}

void SnapshotCatalogue::Imported(const store::SnapshotRecord& record) {
  MarkMetered(record.id, StableNowMs());
  if (default_pool_size_ > 0) pool_.Resize(record.id, default_pool_size_);
  LogInfo("snapshot imported", {{"event", "snapshot.imported"},
                                {"snapshotId", record.id},
                                {"owner", record.owner},
                                {"bytes", record.size_bytes}});
}

void SnapshotCatalogue::MarkMetered(const std::string& id, int64_t at_ms) {
  std::lock_guard lock(metered_mu_);
  metered_ms_[id] = at_ms;
}

void SnapshotCatalogue::ForgetMetered(const std::string& id) {
  std::lock_guard lock(metered_mu_);
  metered_ms_.erase(id);
}

int64_t SnapshotCatalogue::TakeMeteredSince(const std::string& id, int64_t now_ms) {
  std::lock_guard lock(metered_mu_);
  auto it = metered_ms_.find(id);
  if (it == metered_ms_.end()) return now_ms;
  int64_t since = std::min(it->second, now_ms);
  it->second = now_ms;
  return since;
}

std::vector<store::UsageRow> SnapshotCatalogue::MeterStorage(int64_t now_ms,
                                                             const PriceTable& prices) {
  std::vector<store::SnapshotRecord> snaps = store_.List();
  std::vector<store::UsageRow> rows;
  std::lock_guard lock(metered_mu_);
  std::map<std::string, int64_t> still;
  for (const auto& snap : snaps) {
    // Image storage is metered as the image, a pause checkpoint as its
    // sandbox (TakeMeteredSince); a fork's own capture is never billed.
    if (snap.image_warm || snap.temporary) continue;
    auto mark = metered_ms_.find(snap.id);
    if (!snap.paused_sandbox.empty()) {
      if (mark != metered_ms_.end()) still[snap.id] = mark->second;
      continue;
    }
    int64_t since =
        mark != metered_ms_.end() ? mark->second : std::max(snap.created_ms, now_ms - 60000);
    store::UsageRow row;
    row.sandbox_id = snap.id;
    row.key_id = snap.owner;
    row.labels = snap.labels;
    row.kind = "snapshot";
    row.start_ms = since;
    row.end_ms = now_ms;
    row.gb_months = SnapshotGbMonths(snap.size_bytes, now_ms - since);
    row.micros = SnapshotStorageMicrosExact(prices, snap.size_bytes, now_ms - since);
    rows.push_back(row);
    still[snap.id] = now_ms;
  }
  metered_ms_ = std::move(still);
  return rows;
}

}  // namespace kiln::control
