#include "store/usage_store.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

namespace kiln::store {

UsageStore::UsageStore(Db& db) : db_(db) {}

void UsageStore::Record(const std::vector<UsageRow>& rows) {
  if (rows.empty()) return;
  Db::Transaction tx(db_);
  for (const UsageRow& r : rows) {
    // Labels were validated as UTF-8 by the API; replace rather than throw
    // mid-transaction if one slipped through.
    std::string labels =
        nlohmann::json(r.labels).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    db_.Exec(
        "INSERT INTO usage (sandbox_id, key_id, labels, kind, start_ms, end_ms, cpu_seconds, "
        "gib_hours, gb_months, micros) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        {r.sandbox_id, r.key_id, std::move(labels), r.kind, r.start_ms, r.end_ms, r.cpu_seconds,
         r.gib_hours, r.gb_months, r.micros});
  }
  tx.Commit();
}

double UsageStore::Sum(const char* column, const char* where,
                       const std::vector<DbValue>& args) const {
  auto row =
      db_.QueryOne(std::string("SELECT TOTAL(") + column + ") FROM usage WHERE " + where, args);
  return row ? row->Real(0) : 0;
}

double UsageStore::SpentMicrosSince(const std::string& key_id, int64_t since_ms) const {
  return Sum("micros", "key_id = ? AND end_ms > ?", {key_id, since_ms});
}

double UsageStore::SandboxMicros(const std::string& sandbox_id) const {
  return Sum("micros", "sandbox_id = ?", {sandbox_id});
}

double UsageStore::SandboxCpuSeconds(const std::string& sandbox_id) const {
  return Sum("cpu_seconds", "sandbox_id = ?", {sandbox_id});
}

std::vector<UsageStore::Total> UsageStore::Totals(int64_t from_ms, int64_t to_ms,
                                                  const std::string& group_by,
                                                  const std::optional<std::string>& key_id) const {
  std::string group_expr, join, label;
  if (group_by.empty()) {
    group_expr = "'total'";
  } else if (group_by == "key") {
    group_expr = "u.key_id";
  } else if (group_by.starts_with("label:") && group_by.size() > 6) {
    // json_each matches the label name exactly, whatever characters it
    // holds; a json_extract path would need quoting.
    group_expr = "COALESCE(l.value, '')";
    join = " LEFT JOIN json_each(u.labels) AS l ON l.key = ?";
    label = group_by.substr(6);
  } else {
    throw std::invalid_argument("unknown grouping: " + group_by);
  }
  std::string sql = "SELECT " + group_expr +
                    " AS grp, TOTAL(u.cpu_seconds), TOTAL(u.gib_hours), TOTAL(u.gb_months), "
                    "TOTAL(u.micros), COUNT(DISTINCT CASE WHEN u.kind = 'sandbox' THEN "
                    "u.sandbox_id END) FROM usage AS u" +
                    join + " WHERE u.end_ms >= ? AND u.end_ms < ?";
  std::vector<DbValue> args;
  if (!join.empty()) args.emplace_back(label);
  args.emplace_back(from_ms);
  args.emplace_back(to_ms);
  if (key_id) {
    sql += " AND u.key_id = ?";
    args.emplace_back(*key_id);
  }
  // Without GROUP BY the aggregate yields its one "total" row even when no
  // row matches.
  if (!group_by.empty()) sql += " GROUP BY grp ORDER BY grp";
  std::vector<Total> totals;
  for (const DbRow& row : db_.Query(sql, args)) {
    Total t;
    t.group = row.Text(0);
    t.cpu_seconds = row.Real(1);
    t.gib_hours = row.Real(2);
    t.gb_months = row.Real(3);
    t.micros = row.Real(4);
    t.sandboxes = row.Int(5);
    totals.push_back(std::move(t));
  }
  return totals;
}

void UsageStore::DeleteBefore(int64_t ms) { db_.Exec("DELETE FROM usage WHERE end_ms < ?", {ms}); }

}  // namespace kiln::store
