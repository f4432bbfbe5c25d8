// The usage ledger: one row per metered interval of a sandbox or a stored
// snapshot, kept in the daemon's database. Spend limits and the usage API
// are sums over it. Costs are REAL micro-dollars so that the fractions of
// many short intervals add up instead of being rounded away.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "store/db.h"

namespace kiln::store {

struct UsageRow {
  std::string sandbox_id, key_id;  // sandbox_id is the snapshot id for kind "snapshot"
  std::map<std::string, std::string> labels;
  std::string kind = "sandbox";  // "sandbox" | "snapshot"
  int64_t start_ms = 0, end_ms = 0;
  double cpu_seconds = 0, gib_hours = 0, gb_months = 0, micros = 0;
};

class UsageStore {
 public:
  explicit UsageStore(Db& db);

  // Appends rows in one transaction: all or none. Throws DbError (e.g. on
  // an unknown kind).
  void Record(const std::vector<UsageRow>& rows);

  // Sum of micros of `key_id`'s rows with end_ms > since_ms.
  double SpentMicrosSince(const std::string& key_id, int64_t since_ms) const;
  double SandboxMicros(const std::string& sandbox_id) const;
  double SandboxCpuSeconds(const std::string& sandbox_id) const;

  struct Total {
    std::string group;
    double cpu_seconds = 0, gib_hours = 0, gb_months = 0, micros = 0;
    int64_t sandboxes = 0;  // distinct sandbox_id of kind "sandbox"
  };
  // Totals of rows whose end_ms is in [from_ms, to_ms), grouped by
  // `group_by`: "key" (key_id), "label:<name>" (that label's value, "" when
  // absent) or "" (one group named "total", present even with no rows).
  // Groups come sorted by name. `key_id` restricts the rows to one key (a
  // non-admin caller). Throws std::invalid_argument on another group_by.
  std::vector<Total> Totals(int64_t from_ms, int64_t to_ms, const std::string& group_by,
                            const std::optional<std::string>& key_id) const;

  // Retention: drops rows with end_ms < ms.
  void DeleteBefore(int64_t ms);

 private:
  double Sum(const char* column, const char* where, const std::vector<DbValue>& args) const;

  Db& db_;
};

}  // namespace kiln::store
