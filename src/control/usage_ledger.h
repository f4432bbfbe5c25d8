// The usage ledger as the control plane writes it: metered intervals of
// sandboxes and snapshots wait in memory, one row per sandbox or snapshot,
// until the row spans kRowMs, its sandbox stops or pauses, or usage is read;
// then they go to the durable ledger (store::UsageStore) in one write.
//
// It exists apart from the meters because spending checks must see the
// rows still in memory: SpentMicrosSince adds them to what is written, so
// a key cannot outspend its daily limit in the minutes before a flush.
//
// Thread-safe (one lock; the store is written outside it).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "store/usage_store.h"

namespace kiln::control {

class UsageLedger {
 public:
  // A row covers up to 5 minutes of a sandbox: metered every 5 s, 1,000
  // sandboxes would otherwise append 200 rows a second.
  static constexpr int64_t kRowMs = 5 * 60 * 1000;

  explicit UsageLedger(store::UsageStore& store) : store_(store) {}  // `store` outlives it

  // Adds a metered interval to the pending row of its sandbox or snapshot
  // (row.sandbox_id): the first interval's start, the last one's end, the
  // sums of the rest.
  void Accumulate(const store::UsageRow& row);
  // Writes the pending rows that began kRowMs or more before `now_ms`.
  void FlushDue(int64_t now_ms);
  // Writes every pending row (before usage is read).
  void FlushAll();
  // Writes the pending row of one sandbox or snapshot (it stopped or paused).
  void FlushOne(const std::string& id);

  // What a key spent in rows that end after `since_ms`: written and pending.
  double SpentMicrosSince(const std::string& key_id, int64_t since_ms);
  // The written ledger's totals (see store::UsageStore::Totals): call
  // SandboxManager::MeterAll(true) first to include what running sandboxes
  // used until now. Throws std::invalid_argument on a bad group_by.
  std::vector<store::UsageStore::Total> Totals(int64_t from_ms, int64_t to_ms,
                                               const std::string& group_by,
                                               const std::optional<std::string>& owner) const;

 private:
  // Takes the pending rows `take` chooses out of the map and writes them;
  // a failed write is logged (the rows are lost, never half-written).
  template <typename Choose>
  void FlushIf(const Choose& take);

  store::UsageStore& store_;
  std::mutex mu_;
  std::map<std::string, store::UsageRow> pending_;  // by sandbox or snapshot id
};

}  // namespace kiln::control
