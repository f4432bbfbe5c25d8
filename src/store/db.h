// A thin RAII layer over SQLite (Debian's libsqlite3): one connection,
// prepared statements, transactions. kilnd keeps its durable state -- the
// sandbox table, API keys, idempotency answers, the usage ledger -- in one
// database file opened in WAL mode, so a kill -9 loses no committed write.
//
// A Db is safe to share between threads: every call takes its mutex, and a
// Transaction holds it until it ends, so statements of other threads never
// interleave with an open transaction.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace kiln::store {

// Any SQLite failure; what() names the statement and SQLite's message.
class DbError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A value bound to or read from a statement.
using DbValue = std::variant<std::nullptr_t, int64_t, double, std::string>;

// One result row, columns in SELECT order.
class DbRow {
 public:
  explicit DbRow(std::vector<DbValue> values) : values_(std::move(values)) {}
  bool IsNull(size_t i) const { return std::holds_alternative<std::nullptr_t>(values_.at(i)); }
  int64_t Int(size_t i) const;       // 0 for NULL
  double Real(size_t i) const;       // 0 for NULL
  std::string Text(size_t i) const;  // "" for NULL
  size_t size() const { return values_.size(); }

 private:
  std::vector<DbValue> values_;
};

class Db {
 public:
  // Opens (creating if needed) the database at `path`; ":memory:" for tests.
  // Brings its schema to the latest version (store/schema.h); throws
  // DbError for one newer than this code knows, without changing it.
  // Refuses (DbError naming `path` and the problem) a corrupted file and
  // one whose write lock another process holds past the busy timeout.
  explicit Db(const std::string& path);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Bytes SQLite holds in this process (page caches, statements), all
  // connections together.
  static int64_t MemoryUsed();

  // Runs one or more statements without parameters (schema, pragmas).
  void Script(const std::string& sql);
  // Runs one statement; returns the number of rows it changed.
  int Exec(const std::string& sql, const std::vector<DbValue>& args = {});
  // Runs one query; returns every row.
  std::vector<DbRow> Query(const std::string& sql, const std::vector<DbValue>& args = {});
  std::optional<DbRow> QueryOne(const std::string& sql, const std::vector<DbValue>& args = {});

  // BEGIN IMMEDIATE ... COMMIT, rolled back if not committed. While one is
  // open, this thread's Exec/Query calls run inside it and other threads wait.
  class Transaction {
   public:
    explicit Transaction(Db& db);
    ~Transaction();
    void Commit();

   private:
    Db& db_;
    std::unique_lock<std::recursive_mutex> lock_;
    bool done_ = false;
  };

 private:
  // How long a statement waits for another process's lock before failing.
  static constexpr int kBusyTimeoutMs = 5000;

  void CheckUsable(const std::string& path);
  sqlite3_stmt* Prepare(const std::string& sql);
  void Raw(const char* sql);

  std::recursive_mutex mu_;
  sqlite3* db_ = nullptr;
};

}  // namespace kiln::store
