#include "store/schema.h"

#include "store/db.h"

namespace kiln::store {

namespace {

// Append only: a migration that has shipped is never edited, since
// databases that ran it will not run it again. Every statement of
// migration 1 says IF NOT EXISTS because it is the schema kilnd created
// before versions existed: a database made then (user_version 0) has some
// or all of these tables already and is adopted as version 1 unchanged.
constexpr Migration kMigrations[] = {
    // 1: the tables as kilnd created them before versions existed, each
    // statement's text as it was (it is what sqlite_master keeps).
    {1,
     // sandboxes: the durable sandbox table, one JSON record per sandbox.
     "CREATE TABLE IF NOT EXISTS sandboxes ("
     "  id TEXT PRIMARY KEY, owner TEXT NOT NULL, state TEXT NOT NULL,"
     "  created_ms INTEGER NOT NULL, ended_ms INTEGER NOT NULL, record TEXT NOT NULL);"
     "CREATE INDEX IF NOT EXISTS sandboxes_state ON sandboxes (state, created_ms);"
     // api_keys: UNIQUE on the hash gives Authenticate its index.
     "CREATE TABLE IF NOT EXISTS api_keys ("
     " id TEXT PRIMARY KEY,"
     " name TEXT NOT NULL,"
     " secret_sha256 TEXT NOT NULL UNIQUE,"
     " admin INTEGER NOT NULL,"
     " daily_limit_micros INTEGER,"
     " created_ms INTEGER NOT NULL,"
     " revoked_ms INTEGER);"
     // usage: the ledger. The end_ms index serves the admin's unfiltered
     // Totals and retention.
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
  )sql"
     // idempotency: stored answers; status is NULL while the first request runs.
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
  )sql"
     // egress_log: the connections of sandbox egress proxies.
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
  )sql"},
    // 2: images (one JSON record each; versions count per key and name),
    // their tags, the build step cache and registry credentials.
    {2, R"sql(
    CREATE TABLE images (
      id         TEXT PRIMARY KEY,
      owner      TEXT NOT NULL,
      name       TEXT NOT NULL,
      version    INTEGER NOT NULL,
      state      TEXT NOT NULL,
      created_ms INTEGER NOT NULL,
      record     TEXT NOT NULL,
      UNIQUE (owner, name, version)
    );
    CREATE TABLE image_tags (
      owner    TEXT NOT NULL,
      name     TEXT NOT NULL,
      tag      TEXT NOT NULL,
      image_id TEXT NOT NULL,
      PRIMARY KEY (owner, name, tag)
    );
    CREATE INDEX image_tags_image ON image_tags (image_id);
    CREATE TABLE build_cache (
      step_key   TEXT PRIMARY KEY,
      layer      TEXT NOT NULL,
      created_ms INTEGER NOT NULL,
      used_ms    INTEGER NOT NULL
    );
    CREATE TABLE registry_credentials (
      owner      TEXT NOT NULL,
      registry   TEXT NOT NULL,
      username   TEXT NOT NULL,
      password   TEXT NOT NULL,
      created_ms INTEGER NOT NULL,
      PRIMARY KEY (owner, registry)
    );
  )sql"},
    // 3: the build cache per key. A RUN step's layer is what ran in the
    // requester's own sandbox (which it can change while the step runs),
    // so one key's cached layer is never another's; the old shared entries
    // are dropped (a cache: the next build runs the step again).
    {3, R"sql(
    DROP TABLE build_cache;
    CREATE TABLE build_cache (
      owner      TEXT NOT NULL,
      step_key   TEXT NOT NULL,
      layer      TEXT NOT NULL,
      created_ms INTEGER NOT NULL,
      used_ms    INTEGER NOT NULL,
      PRIMARY KEY (owner, step_key)
    );
  )sql"},
    // 4: previews, a sandbox's ports shared by URL. `secret` keys the HMAC
    // of the port's tokens: a rotate replaces it, so every earlier token
    // fails at once with nothing else stored.
    {4, R"sql(
    CREATE TABLE previews (
      sandbox_id TEXT NOT NULL,
      port       INTEGER NOT NULL,
      id         TEXT NOT NULL UNIQUE,
      visibility TEXT NOT NULL CHECK (visibility IN ('private', 'public')),
      secret     TEXT NOT NULL,
      ttl_ms     INTEGER NOT NULL,
      created_ms INTEGER NOT NULL,
      PRIMARY KEY (sandbox_id, port)
    );
  )sql"},
};

}  // namespace

std::span<const Migration> Migrations() { return kMigrations; }

int LatestSchemaVersion() { return kMigrations[std::size(kMigrations) - 1].version; }

int SchemaVersion(Db& db) { return static_cast<int>(db.QueryOne("PRAGMA user_version")->Int(0)); }

void RefuseNewerSchema(Db& db, const std::string& path) {
  int version = SchemaVersion(db);
  if (version > LatestSchemaVersion()) {
    throw DbError(path + " has schema version " + std::to_string(version) +
                  ", newer than the latest this kilnd knows (" +
                  std::to_string(LatestSchemaVersion()) +
                  "); a newer kilnd made it, so this one leaves it untouched");
  }
}

void MigrateSchema(Db& db, const std::string& path) {
  if (SchemaVersion(db) == LatestSchemaVersion()) return;
  for (const Migration& m : kMigrations) {
    Db::Transaction tx(db);
    // Read again inside the transaction: the version only moves under it.
    RefuseNewerSchema(db, path);
    if (SchemaVersion(db) >= m.version) continue;
    db.Script(m.sql);
    db.Script("PRAGMA user_version = " + std::to_string(m.version));
    tx.Commit();
  }
}

}  // namespace kiln::store
