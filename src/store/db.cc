#include "store/db.h"

#include <sqlite3.h>

#include "store/schema.h"

namespace kiln::store {

namespace {

// Finalizes a statement on every path out of a call.
struct StmtGuard {
  sqlite3_stmt* s;
  ~StmtGuard() { sqlite3_finalize(s); }
};

void Bind(sqlite3* db, sqlite3_stmt* s, const std::vector<DbValue>& args, const std::string& sql) {
  for (size_t i = 0; i < args.size(); ++i) {
    int idx = static_cast<int>(i + 1), rc;
    const DbValue& v = args[i];
    if (std::holds_alternative<std::nullptr_t>(v)) {
      rc = sqlite3_bind_null(s, idx);
    } else if (auto* n = std::get_if<int64_t>(&v)) {
      rc = sqlite3_bind_int64(s, idx, *n);
    } else if (auto* d = std::get_if<double>(&v)) {
      rc = sqlite3_bind_double(s, idx, *d);
    } else {
      const auto& t = std::get<std::string>(v);
      rc = sqlite3_bind_text(s, idx, t.data(), static_cast<int>(t.size()), SQLITE_TRANSIENT);
    }
    if (rc != SQLITE_OK) throw DbError("bind " + sql + ": " + sqlite3_errmsg(db));
  }
}

DbValue Column(sqlite3_stmt* s, int i) {
  switch (sqlite3_column_type(s, i)) {
    case SQLITE_INTEGER:
      return static_cast<int64_t>(sqlite3_column_int64(s, i));
    case SQLITE_FLOAT:
      return sqlite3_column_double(s, i);
    case SQLITE_NULL:
      return nullptr;
    default: {
      auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
      return std::string(p ? p : "", sqlite3_column_bytes(s, i));
    }
  }
}

}  // namespace

int64_t DbRow::Int(size_t i) const {
  const DbValue& v = values_.at(i);
  if (auto* n = std::get_if<int64_t>(&v)) return *n;
  if (auto* d = std::get_if<double>(&v)) return static_cast<int64_t>(*d);
  if (auto* t = std::get_if<std::string>(&v)) return std::stoll(*t);
  return 0;
}

double DbRow::Real(size_t i) const {
  const DbValue& v = values_.at(i);
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* n = std::get_if<int64_t>(&v)) return static_cast<double>(*n);
  if (auto* t = std::get_if<std::string>(&v)) return std::stod(*t);
  return 0;
}

std::string DbRow::Text(size_t i) const {
  const DbValue& v = values_.at(i);
  if (auto* t = std::get_if<std::string>(&v)) return *t;
  if (auto* n = std::get_if<int64_t>(&v)) return std::to_string(*n);
  if (auto* d = std::get_if<double>(&v)) return std::to_string(*d);
  return "";
}

Db::Db(const std::string& path) {
  if (sqlite3_open_v2(path.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw DbError("open " + path + ": " + msg);
  }
  sqlite3_busy_timeout(db_, kBusyTimeoutMs);
  try {
    // Before anything writes to the file: a newer kilnd's database, a
    // corrupted one and one another process holds are all left as they are.
    RefuseNewerSchema(*this, path);
    CheckUsable(path);
    // WAL: a committed transaction survives a kill -9 of the process;
    // synchronous=NORMAL only risks the last commits on power loss.
    Script("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;");
    MigrateSchema(*this, path);
  } catch (const DbError& e) {
    sqlite3_close(db_);
    std::string what = e.what();
    if (what.find(path) != std::string::npos) throw;
    throw DbError(path + ": " + what + "; kilnd left the file untouched");
  } catch (...) {
    sqlite3_close(db_);
    throw;
  }
}

void Db::CheckUsable(const std::string& path) {
  if (path == ":memory:") return;
  // A read of every page's structure: a few ms for kilnd's database, and
  // the only way to find damage past the header before writing over it.
  std::vector<DbRow> rows = Query("PRAGMA quick_check(5)");
  if (rows.empty() || rows[0].Text(0) != "ok") {
    std::string problems;
    for (const DbRow& r : rows) problems += (problems.empty() ? "" : "; ") + r.Text(0);
    throw DbError(path + " is corrupt (database disk image is malformed: " + problems +
                  "); kilnd left the file untouched: restore it from a backup, or move it "
                  "away to start with an empty state");
  }
  // Another process holding the write lock: wait busy_timeout for it,
  // then refuse rather than start a daemon that cannot record anything.
  if (sqlite3_exec(db_, "BEGIN IMMEDIATE; ROLLBACK;", nullptr, nullptr, nullptr) != SQLITE_OK) {
    std::string msg = sqlite3_errmsg(db_);
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw DbError(path + " cannot be written (" + msg + ") after waiting " +
                  std::to_string(kBusyTimeoutMs / 1000) +
                  " s: another process holds it; kilnd left the file untouched");
  }
}

Db::~Db() { sqlite3_close_v2(db_); }

void Db::Raw(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw DbError(std::string(sql) + ": " + msg);
  }
}

int64_t Db::MemoryUsed() { return sqlite3_memory_used(); }

void Db::Script(const std::string& sql) {
  std::lock_guard lock(mu_);
  Raw(sql.c_str());
}

sqlite3_stmt* Db::Prepare(const std::string& sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &s, nullptr) !=
      SQLITE_OK) {
    throw DbError("prepare " + sql + ": " + sqlite3_errmsg(db_));
  }
  return s;
}

int Db::Exec(const std::string& sql, const std::vector<DbValue>& args) {
  std::lock_guard lock(mu_);
  StmtGuard g{Prepare(sql)};
  Bind(db_, g.s, args, sql);
  int rc;
  while ((rc = sqlite3_step(g.s)) == SQLITE_ROW) {
  }
  if (rc != SQLITE_DONE) throw DbError(sql + ": " + sqlite3_errmsg(db_));
  return sqlite3_changes(db_);
}

std::vector<DbRow> Db::Query(const std::string& sql, const std::vector<DbValue>& args) {
  std::lock_guard lock(mu_);
  StmtGuard g{Prepare(sql)};
  Bind(db_, g.s, args, sql);
  std::vector<DbRow> rows;
  int rc;
  while ((rc = sqlite3_step(g.s)) == SQLITE_ROW) {
    std::vector<DbValue> values;
    int n = sqlite3_column_count(g.s);
    values.reserve(n);
    for (int i = 0; i < n; ++i) values.push_back(Column(g.s, i));
    rows.emplace_back(std::move(values));
  }
  if (rc != SQLITE_DONE) throw DbError(sql + ": " + sqlite3_errmsg(db_));
  return rows;
}

std::optional<DbRow> Db::QueryOne(const std::string& sql, const std::vector<DbValue>& args) {
  auto rows = Query(sql, args);
  if (rows.empty()) return std::nullopt;
  return std::move(rows.front());
}

Db::Transaction::Transaction(Db& db) : db_(db), lock_(db.mu_) { db_.Raw("BEGIN IMMEDIATE"); }

Db::Transaction::~Transaction() {
  if (!done_) {
    try {
      db_.Raw("ROLLBACK");
    } catch (const DbError&) {
      // Nothing more to undo: SQLite already rolled back.
    }
  }
}

void Db::Transaction::Commit() {
  db_.Raw("COMMIT");
  done_ = true;
}

}  // namespace kiln::store
