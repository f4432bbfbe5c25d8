// kilnd's database schema, versioned with SQLite's user_version: the
// number of migrations (src/store/schema.cc) a database has been through.
#pragma once

#include <span>
#include <string>

namespace kiln::store {

class Db;

// One step of the schema: `sql` takes a database at version - 1 to `version`.
struct Migration {
  int version;
  const char* sql;
};

// Every migration, oldest first (version i + 1 at index i).
std::span<const Migration> Migrations();
int LatestSchemaVersion();

// The database's user_version.
int SchemaVersion(Db& db);

// Throws DbError, naming `path` and both versions, if the database's schema
// is newer than this code knows: a newer kilnd made it, and this one must
// neither use nor change it.
void RefuseNewerSchema(Db& db, const std::string& path);

// Applies the migrations the database has not had, each in its own
// transaction that also sets user_version.
void MigrateSchema(Db& db, const std::string& path);

}  // namespace kiln::store
