#include "store/sandbox_store.h"

namespace kiln::store {

using nlohmann::json;

namespace {

std::vector<json> Records(const std::vector<DbRow>& rows) {
  std::vector<json> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(json::parse(r.Text(0)));
  return out;
}

}  // namespace

SandboxStore::SandboxStore(Db& db) : db_(db) {}

void SandboxStore::Put(const json& r) {
  db_.Exec(
      "INSERT OR REPLACE INTO sandboxes (id, owner, state, created_ms, ended_ms, record) "
      "VALUES (?, ?, ?, ?, ?, ?)",
      {r.at("id").get<std::string>(), r.value("owner", ""), r.value("state", "stopped"),
       r.value("createdMs", int64_t{0}), r.value("endedMs", int64_t{0}), r.dump()});
}

void SandboxStore::Put(const std::vector<json>& records) {
  if (records.empty()) return;
  Db::Transaction tx(db_);
  for (const auto& r : records) Put(r);
  tx.Commit();
}

void SandboxStore::Remove(const std::string& id) {
  db_.Exec("DELETE FROM sandboxes WHERE id = ?", {id});
}

std::vector<json> SandboxStore::Live() const {
  return Records(
      db_.Query("SELECT record FROM sandboxes WHERE state != 'stopped' ORDER BY created_ms, id"));
}

std::vector<json> SandboxStore::RecentlyStopped(size_t limit) const {
  auto rows =
      Records(db_.Query("SELECT record FROM sandboxes WHERE state = 'stopped' "
                        "ORDER BY ended_ms DESC LIMIT ?",
                        {static_cast<int64_t>(limit)}));
  return {rows.rbegin(), rows.rend()};
}

void SandboxStore::DeleteStoppedBefore(int64_t ms) {
  db_.Exec("DELETE FROM sandboxes WHERE state = 'stopped' AND ended_ms < ?", {ms});
}

}  // namespace kiln::store
