#include "store/egress_log_store.h"

namespace kiln::store {

EgressLogStore::EgressLogStore(Db& db, int64_t per_sandbox_cap) : db_(db), cap_(per_sandbox_cap) {}

int64_t EgressLogStore::Add(const EgressEntry& e) {
  Db::Transaction tx(db_);
  db_.Exec(
      "INSERT INTO egress_log (sandbox_id, start_ms, method, host, address, port, verdict, "
      "bytes_out, bytes_in, duration_ms, open, closed_by) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
      {e.sandbox_id, e.start_ms, e.method, e.host, e.address, int64_t{e.port}, e.verdict,
       e.bytes_out, e.bytes_in, e.duration_ms, int64_t{e.open ? 1 : 0}, e.closed_by});
  int64_t seq = db_.QueryOne("SELECT last_insert_rowid()")->Int(0);
  // A sandbox that loops on refused connections must not grow the database
  // without bound: trim its oldest rows now and then.
  if (++adds_ % 256 == 0) {
    db_.Exec(
        "DELETE FROM egress_log WHERE sandbox_id = ? AND seq <= (SELECT seq FROM egress_log "
        "WHERE sandbox_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)",
        {e.sandbox_id, e.sandbox_id, cap_});
  }
  tx.Commit();
  return seq;
}

void EgressLogStore::Close(int64_t seq, int64_t bytes_out, int64_t bytes_in, int64_t duration_ms,
                           const std::string& closed_by) {
  db_.Exec(
      "UPDATE egress_log SET bytes_out = ?, bytes_in = ?, duration_ms = ?, open = 0, "
      "closed_by = ? WHERE seq = ?",
      {bytes_out, bytes_in, duration_ms, closed_by, seq});
}

std::vector<EgressEntry> EgressLogStore::List(const std::string& sandbox_id, int64_t after,
                                              int limit) const {
  std::vector<EgressEntry> out;
  for (const DbRow& r : db_.Query(
           "SELECT seq, sandbox_id, start_ms, method, host, address, port, verdict, bytes_out, "
           "bytes_in, duration_ms, open, closed_by FROM egress_log WHERE sandbox_id = ? AND "
           "seq > ? ORDER BY seq LIMIT ?",
           {sandbox_id, after, int64_t{limit}})) {
    EgressEntry e;
    e.seq = r.Int(0);
    e.sandbox_id = r.Text(1);
    e.start_ms = r.Int(2);
    e.method = r.Text(3);
    e.host = r.Text(4);
    e.address = r.Text(5);
    e.port = static_cast<int>(r.Int(6));
    e.verdict = r.Text(7);
    e.bytes_out = r.Int(8);
    e.bytes_in = r.Int(9);
    e.duration_ms = r.Int(10);
    e.open = r.Int(11) != 0;
    e.closed_by = r.Text(12);
    out.push_back(std::move(e));
  }
  return out;
}

void EgressLogStore::CloseAllOpen() {
  db_.Exec("UPDATE egress_log SET open = 0, closed_by = 'daemon-restart' WHERE open = 1");
}

void EgressLogStore::DeleteBefore(int64_t ms) {
  db_.Exec("DELETE FROM egress_log WHERE start_ms < ? AND open = 0", {ms});
}

}  // namespace kiln::store
