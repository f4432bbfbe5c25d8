// The database schema's versions (store/schema.h): fresh, legacy (made
// before versions existed), future and reopened databases.
#include "store/schema.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "store/db.h"
#include "unit/support/temp_dir.h"

namespace kiln::store {
namespace schema_test {
namespace {

namespace fs = std::filesystem;

// What kilnd created before user_version, statement for statement: each
// store made its own table(s). Kept here as it was, whatever schema.cc
// becomes.
constexpr const char* kLegacySchema[] = {
    "CREATE TABLE IF NOT EXISTS sandboxes ("
    "  id TEXT PRIMARY KEY, owner TEXT NOT NULL, state TEXT NOT NULL,"
    "  created_ms INTEGER NOT NULL, ended_ms INTEGER NOT NULL, record TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS sandboxes_state ON sandboxes (state, created_ms);",
    "CREATE TABLE IF NOT EXISTS api_keys ("
    " id TEXT PRIMARY KEY,"
    " name TEXT NOT NULL,"
    " secret_sha256 TEXT NOT NULL UNIQUE,"
    " admin INTEGER NOT NULL,"
    " daily_limit_micros INTEGER,"
    " created_ms INTEGER NOT NULL,"
    " revoked_ms INTEGER)",
    R"sql(
    CREATE TABLE IF NOT EXISTS usage (
      sandbox_id  TEXT NOT NULL,
      key_id      TEXT NOT NULL,
      labels      TEXT NOT NULL DEFAULT '{}',
      kind        TEXT NOT NULL CHECK (kind IN ('sandbox', 'snapshot')),
      start_ms    INTEGER NOT NULL,
      end_ms      INTEGER NOT NULL,
      cpu_seconds REAL NOT NULL DEFAULT 0,
      gib_hours   REAL NOT NULL DEFAULT 0,
      gb_months   REAL NOT NULL DEFAULT 0,
      micros      REAL NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS usage_key_end ON usage (key_id, end_ms);
    CREATE INDEX IF NOT EXISTS usage_sandbox ON usage (sandbox_id);
    CREATE INDEX IF NOT EXISTS usage_end ON usage (end_ms);
  )sql",
    R"sql(
    CREATE TABLE IF NOT EXISTS idempotency (
      key_id      TEXT NOT NULL,
      idem_key    TEXT NOT NULL,
      fingerprint TEXT NOT NULL,
      created_ms  INTEGER NOT NULL,
      status      INTEGER,
      body        TEXT,
      PRIMARY KEY (key_id, idem_key)
    );
    CREATE INDEX IF NOT EXISTS idempotency_created ON idempotency (created_ms);
  )sql",
    R"sql(
    CREATE TABLE IF NOT EXISTS egress_log (
      seq         INTEGER PRIMARY KEY AUTOINCREMENT,
      sandbox_id  TEXT NOT NULL,
      start_ms    INTEGER NOT NULL,
      method      TEXT NOT NULL,
      host        TEXT NOT NULL,
      address     TEXT NOT NULL,
      port        INTEGER NOT NULL,
      verdict     TEXT NOT NULL,
      bytes_out   INTEGER NOT NULL DEFAULT 0,
      bytes_in    INTEGER NOT NULL DEFAULT 0,
      duration_ms INTEGER NOT NULL DEFAULT 0,
      open        INTEGER NOT NULL DEFAULT 0,
      closed_by   TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX IF NOT EXISTS egress_log_sandbox ON egress_log (sandbox_id, seq);
  )sql",
};

class SchemaTest : public ::testing::Test {
 protected:
  void SetUp() override { path_ = (dir_ / "kiln.db").string(); }

  // Runs `sql` on the file with SQLite alone (no Db, so no migration).
  void Raw(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    std::string msg = err ? err : "";
    sqlite3_free(err);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << msg;
  }

  // Every table and index with its SQL, as SQLite keeps them.
  static std::vector<std::string> Objects(Db& db) {
    std::vector<std::string> out;
    for (const auto& row :
         db.Query("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
                  "ORDER BY name")) {
      out.push_back(row.Text(0) + " " + row.Text(1) + ": " + row.Text(2));
    }
    return out;
  }

  testutil::TempDir tmp_{"kiln-schema"};
  const fs::path dir_ = tmp_.path();
  std::string path_;
};

TEST_F(SchemaTest, MigrationsAreNumberedInOrder) {
  auto migrations = Migrations();
  ASSERT_FALSE(migrations.empty());
  for (size_t i = 0; i < migrations.size(); ++i)
    EXPECT_EQ(migrations[i].version, static_cast<int>(i) + 1);
  EXPECT_EQ(LatestSchemaVersion(), static_cast<int>(migrations.size()));
}

TEST_F(SchemaTest, FreshDatabaseEndsAtTheLatestVersion) {
  Db db(path_);
  EXPECT_EQ(SchemaVersion(db), LatestSchemaVersion());
  for (const char* table : {"sandboxes", "api_keys", "usage", "idempotency", "egress_log"}) {
    EXPECT_TRUE(db.QueryOne("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                            {std::string(table)}))
        << table;
  }
  Db memory(":memory:");
  EXPECT_EQ(SchemaVersion(memory), LatestSchemaVersion());
}

TEST_F(SchemaTest, LegacyDatabaseIsAdoptedWithItsRows) {
  for (const char* sql : kLegacySchema) Raw(sql);
  Raw("INSERT INTO sandboxes VALUES ('sbx_1', 'key_1', 'running', 1, 0, '{\"id\":\"sbx_1\"}');"
      "INSERT INTO api_keys VALUES ('key_1', 'ci', 'abc', 0, NULL, 5, NULL);"
      "INSERT INTO usage (sandbox_id, key_id, kind, start_ms, end_ms, micros) "
      "  VALUES ('sbx_1', 'key_1', 'sandbox', 1, 2, 3.5);"
      "INSERT INTO idempotency VALUES ('key_1', 'k', 'fp', 7, 200, '{}');"
      "INSERT INTO egress_log (sandbox_id, start_ms, method, host, address, port, verdict) "
      "  VALUES ('sbx_1', 9, 'GET', 'example.com', '192.0.2.1', 80, 'allowed');");
  Raw("PRAGMA user_version = 0");

  Db db(path_);
  EXPECT_EQ(SchemaVersion(db), LatestSchemaVersion());
  EXPECT_EQ(db.QueryOne("SELECT record FROM sandboxes WHERE id = 'sbx_1'")->Text(0),
            "{\"id\":\"sbx_1\"}");
  EXPECT_EQ(db.QueryOne("SELECT name FROM api_keys WHERE id = 'key_1'")->Text(0), "ci");
  EXPECT_DOUBLE_EQ(db.QueryOne("SELECT micros FROM usage")->Real(0), 3.5);
  EXPECT_EQ(db.QueryOne("SELECT status FROM idempotency")->Int(0), 200);
  EXPECT_EQ(db.QueryOne("SELECT host FROM egress_log")->Text(0), "example.com");

  // Migration 1 is the legacy schema itself: the adopted database and a
  // fresh one have the same tables and indexes, with the same SQL.
  if (LatestSchemaVersion() == 1) {
    Db fresh(":memory:");
    EXPECT_EQ(Objects(db), Objects(fresh));
  }
}

TEST_F(SchemaTest, PartlyCreatedLegacyDatabaseGetsTheMissingTables) {
  Raw(kLegacySchema[0]);  // a daemon that died between two stores' set-up
  Raw("INSERT INTO sandboxes VALUES ('sbx_1', 'key_1', 'stopped', 1, 2, '{}')");
  Db db(path_);
  EXPECT_EQ(SchemaVersion(db), LatestSchemaVersion());
  EXPECT_EQ(db.Query("SELECT id FROM sandboxes").size(), 1u);
  EXPECT_EQ(db.Query("SELECT key_id FROM idempotency").size(), 0u);
}

TEST_F(SchemaTest, FutureDatabaseIsRefusedAndLeftAsItIs) {
  const int future = LatestSchemaVersion() + 1;
  Raw("CREATE TABLE from_the_future (x INTEGER); PRAGMA user_version = " + std::to_string(future));
  try {
    Db db(path_);
    FAIL() << "a database at version " << future << " was opened";
  } catch (const DbError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(path_), std::string::npos) << what;
    EXPECT_NE(what.find("version " + std::to_string(future)), std::string::npos) << what;
    EXPECT_NE(what.find("(" + std::to_string(LatestSchemaVersion()) + ")"), std::string::npos)
        << what;
  }
  // Untouched: still its version, its one table, and not switched to WAL.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &raw), SQLITE_OK);
  auto scalar = [&](const char* sql) {
    sqlite3_stmt* s = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(raw, sql, -1, &s, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_step(s), SQLITE_ROW);
    std::string v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return v;
  };
  EXPECT_EQ(scalar("PRAGMA user_version"), std::to_string(future));
  EXPECT_EQ(scalar("SELECT group_concat(name) FROM sqlite_master"), "from_the_future");
  EXPECT_EQ(scalar("PRAGMA journal_mode"), "delete");
  sqlite3_close(raw);
}

TEST_F(SchemaTest, ReopeningChangesNothing) {
  std::vector<std::string> objects;
  {
    Db db(path_);
    db.Exec("INSERT INTO api_keys VALUES ('key_1', 'ci', 'abc', 0, NULL, 5, NULL)");
    objects = Objects(db);
  }
  for (int i = 0; i < 2; ++i) {
    Db db(path_);
    EXPECT_EQ(SchemaVersion(db), LatestSchemaVersion());
    EXPECT_EQ(Objects(db), objects);
    EXPECT_EQ(db.Query("SELECT id FROM api_keys").size(), 1u);
  }
  // Running the migrations again on an up-to-date database does nothing.
  Db db(path_);
  MigrateSchema(db, path_);
  EXPECT_EQ(SchemaVersion(db), LatestSchemaVersion());
  EXPECT_EQ(Objects(db), objects);
}

}  // namespace
}  // namespace schema_test
}  // namespace kiln::store
