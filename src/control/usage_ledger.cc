#include "control/usage_ledger.h"

#include "common/log.h"

namespace kiln::control {

void UsageLedger::Accumulate(const store::UsageRow& row) {
  std::lock_guard lock(mu_);
  auto [it, fresh] = pending_.try_emplace(row.sandbox_id, row);
  if (fresh) return;
  store::UsageRow& p = it->second;
  p.end_ms = row.end_ms;
  p.cpu_seconds += row.cpu_seconds;
  p.gib_hours += row.gib_hours;
  p.gb_months += row.gb_months;
  p.micros += row.micros;
}

template <typename Choose>
void UsageLedger::FlushIf(const Choose& take) {
  std::vector<store::UsageRow> due;
  {
    std::lock_guard lock(mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (take(it->first, it->second)) {
        due.push_back(std::move(it->second));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  try {
    store_.Record(due);
  } catch (const std::exception& e) {
    LogError("cannot record usage", {{"error", e.what()}});
  }
}

void UsageLedger::FlushDue(int64_t now_ms) {
  FlushIf([&](const std::string&, const store::UsageRow& row) {
    return row.start_ms <= now_ms - kRowMs;
  });
}

void UsageLedger::FlushAll() {
  FlushIf([](const std::string&, const store::UsageRow&) { return true; });
}

void UsageLedger::FlushOne(const std::string& id) {
  FlushIf([&](const std::string& pending_id, const store::UsageRow&) { return pending_id == id; });
}

double UsageLedger::SpentMicrosSince(const std::string& key_id, int64_t since_ms) {
  double spent = store_.SpentMicrosSince(key_id, since_ms);
  std::lock_guard lock(mu_);
  for (const auto& [id, row] : pending_) {
    if (row.key_id == key_id && row.end_ms > since_ms) spent += row.micros;
  }
  return spent;
}

std::vector<store::UsageStore::Total> UsageLedger::Totals(
    int64_t from_ms, int64_t to_ms, const std::string& group_by,
    const std::optional<std::string>& owner) const {
  return store_.Totals(from_ms, to_ms, group_by, owner);
}

}  // namespace kiln::control
