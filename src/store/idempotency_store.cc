#include "store/idempotency_store.h"

#include <algorithm>

#include "common/digest.h"
#include "common/time.h"

namespace kiln::store {

IdempotencyStore::IdempotencyStore(Db& db, int64_t ttl_ms, std::function<int64_t()> now)
    : db_(db), ttl_ms_(ttl_ms), now_(now ? std::move(now) : std::function<int64_t()>(NowMs)) {
  // status is NULL while the first request runs.
  db_.Exec("DELETE FROM idempotency WHERE status IS NULL");
}

std::string IdempotencyStore::Fingerprint(const std::string& method, const std::string& path,
                                          const std::string& body) {
  // Neither a method nor a request path can hold a space or a newline.
  return Sha256Hex(method + " " + path + "\n" + body);
}

IdempotencyStore::Begin IdempotencyStore::Start(const std::string& key_id,
                                                const std::string& idem_key,
                                                const std::string& fingerprint, int* status,
                                                std::string* body) {
  // The transaction holds the Db's lock from the lookup to the insert, so a
  // concurrent Start with the same key sees this one's row.
  Db::Transaction tx(db_);
  const int64_t now = now_();
  auto row = db_.QueryOne(
      "SELECT fingerprint, created_ms, status, body FROM idempotency "
      "WHERE key_id = ? AND idem_key = ?",
      {key_id, idem_key});
  if (row && now - row->Int(1) < ttl_ms_) {
    if (row->Text(0) != fingerprint) return Begin::kMismatch;
    if (row->IsNull(2)) return Begin::kInProgress;
    if (status) *status = static_cast<int>(row->Int(2));
    if (body) *body = row->Text(3);
    return Begin::kReplay;
  }
  // Absent or expired: this request owns the key now. Room first: a key
  // keeps at most kMaxEntriesPerKey answers of kMaxBytesPerKey in all.
  auto held = db_.QueryOne(
      "SELECT COUNT(*), COALESCE(SUM(LENGTH(body)), 0) FROM idempotency WHERE key_id = ?",
      {key_id});
  if (held && (held->Int(0) >= kMaxEntriesPerKey || held->Int(1) > kMaxBytesPerKey)) {
    db_.Exec(
        "DELETE FROM idempotency WHERE rowid IN (SELECT rowid FROM idempotency "
        "WHERE key_id = ? AND status IS NOT NULL ORDER BY created_ms LIMIT ?)",
        {key_id, std::max<int64_t>(1, held->Int(0) / 10)});
  }
  db_.Exec(
      "INSERT OR REPLACE INTO idempotency (key_id, idem_key, fingerprint, created_ms, status, "
      "body) VALUES (?, ?, ?, ?, NULL, NULL)",
      {key_id, idem_key, fingerprint, now});
  tx.Commit();
  return Begin::kNew;
}

void IdempotencyStore::Complete(const std::string& key_id, const std::string& idem_key, int status,
                                const std::string& body) {
  db_.Exec(
      "UPDATE idempotency SET status = ?, body = ? "
      "WHERE key_id = ? AND idem_key = ? AND status IS NULL",
      {int64_t{status}, body, key_id, idem_key});
}

void IdempotencyStore::Abandon(const std::string& key_id, const std::string& idem_key) {
  // Only an entry still in progress: a stored answer stays replayable.
  db_.Exec("DELETE FROM idempotency WHERE key_id = ? AND idem_key = ? AND status IS NULL",
           {key_id, idem_key});
}

void IdempotencyStore::DeleteExpired(int64_t now_ms) {
  db_.Exec("DELETE FROM idempotency WHERE created_ms <= ?", {now_ms - ttl_ms_});
}

}  // namespace kiln::store
